package async_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/erasure"
)

// A chunked job whose checkpoint a permanent deletion's erasure redacts
// after its last chunk, before its result is recorded: the result the run
// made from what it held in memory (her source_id in a failure) is not
// recorded; the job runs again from the redacted checkpoint, and its
// result lists the failure without her value.
func TestAJobResultIsNotRecordedFromACheckpointRedactedAfterItsLastChunk(t *testing.T) {
	url := database(t)
	p := open(t, url)
	ctx := context.Background()
	type failure struct {
		Row      int     `json:"row"`
		SourceID *string `json:"source_id"`
	}
	reg := async.NewRegistry()
	var runs atomic.Int32
	chunked, erased := make(chan struct{}), make(chan struct{})
	reg.HandleJob("CUSTOMERS.BULK_UPDATE", func(ctx context.Context, job *async.Job) (any, error) {
		run := runs.Add(1)
		var st async.Chunked[failure]
		if _, err := job.Resume(ctx, &st); err != nil {
			return nil, err
		}
		err := async.RunChunks(ctx, job, &st, 2, 2, func(_ context.Context, _ pgx.Tx, st *async.Chunked[failure], _, _ int) error {
			src := "xena-unit"
			st.Fail(failure{Row: 1, SourceID: &src})
			st.DoneCount++
			return nil
		})
		if err != nil {
			return nil, err
		}
		if run == 1 {
			chunked <- struct{}{}
			<-erased
		}
		return map[string]any{"done_count": st.DoneCount, "failed": st.Listed()}, nil
	})
	act := started(t, p, func(ctx context.Context, tx pgx.Tx) (async.Action, error) {
		return async.StartJob(ctx, tx, "proj_a", "CUSTOMERS.BULK_UPDATE", nil)
	})
	runWorker(t, url, reg)

	select {
	case <-chunked:
	case <-time.After(20 * time.Second):
		t.Fatal("the job's chunk did not commit")
	}
	subj := erasure.Subject{CustomerID: "cust_xena", Values: []string{"xena-unit", "Xena Unit"}}
	if err := db.InTx(ctx, p, func(tx pgx.Tx) error { return async.EraseCustomer(ctx, tx, "proj_a", subj, nil) }); err != nil {
		t.Fatal(err)
	}
	var cp string
	if err := p.QueryRow(ctx, `SELECT checkpoint::TEXT FROM async_actions WHERE project_id = 'proj_a' AND id = $1`, act.ID).Scan(&cp); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cp, "xena-unit") || !strings.Contains(cp, `"next": 2`) {
		t.Fatalf("the checkpoint after the erasure: %s", cp)
	}
	close(erased)

	var a async.Action
	waitFor(t, 20*time.Second, func() bool {
		var err error
		a, err = async.GetAction(ctx, p, "proj_a", act.ID)
		return err == nil && a.Status == async.Done
	})
	if strings.Contains(string(a.Result), "xena-unit") || !strings.Contains(string(a.Result), `"source_id": null`) &&
		!strings.Contains(string(a.Result), `"source_id":null`) {
		t.Errorf("the result: %s", a.Result)
	}
	if runs.Load() != 2 {
		t.Errorf("%d runs, want 2 (the result of the first not recorded)", runs.Load())
	}
}
