package async_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
)

func TestJobRunsAsAnAsyncActionWithProgressAndResult(t *testing.T) {
	url := database(t)
	p := open(t, url)
	ctx := context.Background()
	reg := async.NewRegistry()
	release := make(chan struct{})
	reg.HandleJob("PRODUCTS.IMPORT_CSV", func(ctx context.Context, job *async.Job) (any, error) {
		var params struct{ Rows int }
		if err := json.Unmarshal(job.Params, &params); err != nil {
			return nil, err
		}
		if err := job.Progress(ctx, 40); err != nil {
			return nil, err
		}
		<-release
		return map[string]int{"imported": params.Rows}, nil
	})
	reg.HandleJob("SKUS.IMPORT_CSV", func(ctx context.Context, job *async.Job) (any, error) {
		return nil, errors.New("line 3: price must be a number")
	})
	var ok, failed async.Action
	err := db.InTx(ctx, p, func(tx pgx.Tx) error {
		var err error
		if ok, err = async.StartJob(ctx, tx, "proj_a", "PRODUCTS.IMPORT_CSV", map[string]int{"Rows": 7}); err != nil {
			return err
		}
		failed, err = async.StartJob(ctx, tx, "proj_a", "SKUS.IMPORT_CSV", nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok.Status != async.Enqueued {
		t.Fatalf("new action: %+v", ok)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(wctx)

	get := func(id string) async.Action {
		a, err := async.GetAction(ctx, p, "proj_a", id)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	waitFor(t, 5*time.Second, func() bool { a := get(ok.ID); return a.Status == async.InProgress && a.Progress == 40 })
	close(release)
	waitFor(t, 5*time.Second, func() bool { return get(ok.ID).Status == async.Done })
	a := get(ok.ID)
	if a.Progress != 100 || *a.OperationStatus != "SUCCESS" || string(a.Result) != `{"imported": 7}` || a.ProcessingTime == nil {
		t.Fatalf("done action: %+v result %s", a, a.Result)
	}
	waitFor(t, 5*time.Second, func() bool { return get(failed.ID).Status == async.Failed })
	if f := get(failed.ID); string(f.Result) != `{"message": "line 3: price must be a number"}` {
		t.Fatalf("failed action result %s", f.Result)
	}
	if _, err := async.GetAction(ctx, p, "proj_other", ok.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("another project's action: %v", err)
	}
	list, err := async.ListActions(ctx, p, "proj_a", nil, listq.Query{Limit: 10, Desc: true})
	if err != nil || len(list) != 2 || list[0].ID != failed.ID {
		t.Fatalf("list newest first: %v %v", list, err)
	}
}

// A job whose worker dies is run again by another; what it checkpointed is
// not done twice, and its input (kept in parts) is read whole both times.
func TestJobRunAgainGoesOnFromItsCheckpoint(t *testing.T) {
	url := database(t)
	p := open(t, url)
	ctx := context.Background()
	input := bytes.Repeat([]byte("0123456789"), 120_000) // 1.2 MB: three parts
	reg := async.NewRegistry()
	var runs atomic.Int32
	block := make(chan struct{})
	type state struct {
		Next int
		Runs []int32
	}
	reg.HandleJob("PRODUCTS.IMPORT_CSV", func(ctx context.Context, job *async.Job) (any, error) {
		run := runs.Add(1)
		in, err := job.Input(ctx)
		if err != nil || !bytes.Equal(in, input) {
			return nil, fmt.Errorf("input: %d bytes, %v", len(in), err)
		}
		var st state
		if _, err := job.Resume(ctx, &st); err != nil {
			return nil, err
		}
		for st.Next < 4 {
			next := state{Next: st.Next + 1, Runs: append(append([]int32(nil), st.Runs...), run)}
			if err := db.InTx(ctx, p, func(tx pgx.Tx) error { return job.Checkpoint(ctx, tx, next, next.Next*25) }); err != nil {
				return nil, err
			}
			st = next
			if run == 1 && st.Next == 2 {
				<-block // the worker "dies" here
				return nil, errors.New("a run whose lease was lost must not count")
			}
		}
		return st, nil
	})
	act := started(t, p, func(ctx context.Context, tx pgx.Tx) (async.Action, error) {
		return async.StartJobWithInput(ctx, tx, "proj_a", "PRODUCTS.IMPORT_CSV", nil, input)
	})
	get := func() async.Action { return action(t, p, act.ID) }
	w1ctx, stop1 := context.WithCancel(ctx)
	p1 := open(t, url)
	go async.NewWorker(p1, reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(w1ctx)
	waitFor(t, 20*time.Second, func() bool { return get().Progress == 50 })
	stop1() // no more claims from the first worker; its run hangs on
	// A dead worker extends no lease: without its database, the hung run's
	// heartbeat cannot win the lease back after it lapses below (it did,
	// when a beat fell between the lapse and the second worker's claim).
	p1.Close()
	if _, err := p.Exec(ctx, `UPDATE outbox SET run_after = now() WHERE project_id = 'proj_a'`); err != nil {
		t.Fatal(err) // the lease lapses
	}
	runWorker(t, url, reg)
	// Generous: under a parallel `make test` with the race detector, claims
	// and commits on the shared servers can be slow.
	waitFor(t, 20*time.Second, func() bool { return get().Status == async.Done })
	close(block)
	time.Sleep(100 * time.Millisecond)
	a := get()
	if a.Status != async.Done || string(a.Result) != `{"Next": 4, "Runs": [1, 1, 2, 2]}` {
		t.Fatalf("action: %+v %s", a, a.Result)
	}
	var parts, checkpoints int
	if err := p.QueryRow(ctx, `SELECT (SELECT count(*) FROM async_inputs), (SELECT count(*) FROM async_actions WHERE checkpoint IS NOT NULL)`).
		Scan(&parts, &checkpoints); err != nil || parts != 0 || checkpoints != 0 {
		t.Fatalf("left behind: %d input parts, %d checkpoints, %v", parts, checkpoints, err)
	}
}
