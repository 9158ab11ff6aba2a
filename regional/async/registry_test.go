package async_test

import (
	"context"
	"testing"

	"github.com/tallyhq/tally/regional/async"
)

func TestRegisteringAfterAWorkerStartedPanicsAndLeavesTheTableAsItWas(t *testing.T) {
	reg := async.NewRegistry()
	reg.HandleTx("test.before", effect, async.Policy{MaxAttempts: 3})
	reg.Seal()
	ext := func(context.Context, async.Task) async.Outcome { return async.Outcome{} }
	for name, register := range map[string]func(){
		"HandleTx":       func() { reg.HandleTx("test.before", effect, async.Policy{MaxAttempts: 9}) },
		"Handle":         func() { reg.Handle("test.after", ext, async.Policy{}) },
		"HandleRecorded": func() { reg.HandleRecorded("test.after", ext, nil, async.Policy{}) },
		"HandleJob":      func() { reg.HandleJob("TEST.AFTER", nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("registered after the registry was sealed")
				}
			}()
			register()
		})
	}
	if p, ok := reg.Policy("test.before"); !ok || p.MaxAttempts != 3 {
		t.Fatalf("test.before's policy is %+v (%v), want the one registered before the seal", p, ok)
	}
	if _, ok := reg.Policy("test.after"); ok {
		t.Fatal("test.after was registered after the seal")
	}
}
