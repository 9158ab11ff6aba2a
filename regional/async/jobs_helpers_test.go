package async_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
)

// started is the action start makes in a transaction of its own.
func started(t *testing.T, p *db.Pool, start func(ctx context.Context, tx pgx.Tx) (async.Action, error)) async.Action {
	t.Helper()
	var act async.Action
	if err := db.InTx(context.Background(), p, func(tx pgx.Tx) error {
		var err error
		act, err = start(context.Background(), tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return act
}

// action is proj_a's action id as it is now.
func action(t *testing.T, p *db.Pool, id string) async.Action {
	t.Helper()
	a, err := async.GetAction(context.Background(), p, "proj_a", id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runWorker runs a worker of reg on a pool of its own until the test ends.
func runWorker(t *testing.T, url string, reg *async.Registry) {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(ctx)
}
