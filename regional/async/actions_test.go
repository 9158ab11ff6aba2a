package async_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
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
	list, err := async.ListActions(ctx, p, "proj_a", nil, "", 10)
	if err != nil || len(list) != 2 || list[0].ID != failed.ID {
		t.Fatalf("list newest first: %v %v", list, err)
	}
}
