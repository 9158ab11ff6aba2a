package runtimex_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/runtimex"
)

func TestCallTurnsAPanicIntoAnErrorWithItsStack(t *testing.T) {
	err := runtimex.Call(func() error {
		var m map[string]int
		m["x"]++ // panics
		return nil
	})
	var pe *runtimex.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *PanicError", err)
	}
	if !strings.Contains(err.Error(), "assignment to entry in nil map") || !strings.Contains(string(pe.Stack), "panics_test.go") {
		t.Fatalf("err = %v, stack:\n%s", err, pe.Stack)
	}
	want := errors.New("plain")
	if err := runtimex.Call(func() error { return want }); err != want {
		t.Fatalf("err = %v, want %v", err, want)
	}
}
