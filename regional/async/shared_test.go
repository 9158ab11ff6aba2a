package async_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/txshared"
	"github.com/tallyhq/tally/regional/async"
)

// The tasks of a batch share what txshared.Get read for the first of them:
// 20 tasks enqueued together, claimed as one batch, read the shared value
// once, where each task read it once before.
func TestTasksOfABatchReadASharedValueOnce(t *testing.T) {
	url := database(t)
	p := open(t, url)
	var reads, runs atomic.Int64
	reg := async.NewRegistry()
	reg.HandleTx("test.shared", func(ctx context.Context, tx pgx.Tx, task async.Task) error {
		v, err := txshared.Get(ctx, "rules", func() (string, error) {
			reads.Add(1)
			var s string
			return s, tx.QueryRow(ctx, `SELECT 'read'`).Scan(&s)
		})
		if err != nil || v != "read" {
			t.Errorf("shared %q, %v", v, err)
		}
		runs.Add(1)
		return effect(ctx, tx, task)
	}, async.Policy{ReadCommitted: true})
	enqueue(t, p, "test.shared", 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(ctx)
	waitFor(t, 10*time.Second, func() bool { return runs.Load() >= 20 })
	if n := reads.Load(); n != 1 {
		t.Fatalf("the shared value read %d times for a batch of 20 tasks, want 1", n)
	}
	// Outside a worker's transaction, every call reads.
	for range 2 {
		_, _ = txshared.Get(context.Background(), "rules", func() (int, error) { reads.Add(1); return 1, nil })
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("%d reads after two outside a worker, want 3", n)
	}
}
