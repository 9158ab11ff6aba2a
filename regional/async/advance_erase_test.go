package async_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/erasure"
)

// A job fenced with Advance whose checkpoint two permanent deletions'
// erasures redact in turn under its run: Advance from the checkpoint the
// run wrote is a RedactedError holding the redacted one (not
// ErrSuperseded), Advance from a checkpoint the stored one was not
// redacted from (a run whose lease lapsed) is still ErrSuperseded, and
// Advance from the stored one moves it on. An erasure whose value only
// matches inside the mark's digests leaves the checkpoint as it is.
func TestAdvanceTakesACheckpointRedactedUnderItsRun(t *testing.T) {
	url := database(t)
	p := open(t, url)
	ctx := context.Background()
	type state struct {
		Next    int      `json:"next"`
		Reasons []string `json:"reasons"`
	}
	reg := async.NewRegistry()
	advanced, erased := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 3)
	var stored []byte
	reg.HandleJob("EVENTS.BULK_CREATE", func(ctx context.Context, job *async.Job) (any, error) {
		s1 := state{Next: 1, Reasons: []string{`got "xena-unit!" from Yves Unit`}}
		if err := job.Advance(ctx, p, nil, s1, 10); err != nil {
			return nil, err
		}
		advanced <- struct{}{}
		<-erased
		s2 := state{Next: 2, Reasons: s1.Reasons}
		err := job.Advance(ctx, p, s1, s2, 20)
		errs <- err
		var re *async.RedactedError
		if errors.As(err, &re) {
			stored = re.Stored
		}
		errs <- job.Advance(ctx, p, state{Next: 1}, s2, 20)
		var st state
		if err := json.Unmarshal(stored, &st); err != nil {
			return nil, err
		}
		errs <- job.Advance(ctx, p, json.RawMessage(stored), state{Next: 2, Reasons: st.Reasons}, 20)
		return map[string]any{}, nil
	})
	act := started(t, p, func(ctx context.Context, tx pgx.Tx) (async.Action, error) {
		return async.StartJob(ctx, tx, "proj_a", "EVENTS.BULK_CREATE", nil)
	})
	runWorker(t, url, reg)
	select {
	case <-advanced:
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not advance")
	}
	for _, s := range []erasure.Subject{{CustomerID: "cust_xena", Values: []string{"xena-unit"}},
		{CustomerID: "cust_yves", Values: []string{"Yves Unit"}}} {
		if err := db.InTx(ctx, p, func(tx pgx.Tx) error { return async.EraseCustomer(ctx, tx, "proj_a", s, nil) }); err != nil {
			t.Fatal(err)
		}
	}
	// A third customer's value is hex digits found inside the mark's
	// digest: the mark is the store's bookkeeping, not redacted, and the
	// checkpoint is left as it was.
	checkpoint := func() (raw string, mark []string) {
		if err := p.QueryRow(ctx, `SELECT checkpoint::TEXT FROM async_actions WHERE project_id = 'proj_a' AND id = $1`,
			act.ID).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var cp struct {
			Mark []string `json:"_erased_from"`
		}
		if err := json.Unmarshal([]byte(raw), &cp); err != nil || len(cp.Mark) != 2 {
			t.Fatalf("the checkpoint's mark: %s, %v", raw, err)
		}
		return raw, cp.Mark
	}
	before, mark := checkpoint()
	hex := erasure.Subject{CustomerID: "cust_hex", Values: []string{mark[0][3:11]}}
	if err := db.InTx(ctx, p, func(tx pgx.Tx) error { return async.EraseCustomer(ctx, tx, "proj_a", hex, nil) }); err != nil {
		t.Fatal(err)
	}
	if after, _ := checkpoint(); after != before {
		t.Errorf("an erasure whose value is inside the mark rewrote the checkpoint: %s, was %s", after, before)
	}
	close(erased)

	var re *async.RedactedError
	if err := <-errs; !errors.As(err, &re) {
		t.Fatalf("Advance from the checkpoint redacted twice under the run: %v", err)
	}
	if s := string(re.Stored); strings.Contains(s, "xena-unit") || strings.Contains(s, "Yves Unit") || !strings.Contains(s, `"next": 1`) {
		t.Errorf("the redacted checkpoint: %s", s)
	}
	if err := <-errs; !errors.Is(err, async.ErrSuperseded) {
		t.Errorf("Advance from another checkpoint: %v, want ErrSuperseded", err)
	}
	if err := <-errs; err != nil {
		t.Errorf("Advance from the stored checkpoint: %v", err)
	}
	var a async.Action
	waitFor(t, 20*time.Second, func() bool {
		var err error
		a, err = async.GetAction(ctx, p, "proj_a", act.ID)
		return err == nil && a.Status == async.Done
	})
}
