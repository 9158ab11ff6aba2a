package async_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
)

// Tasks that lock the same customer's rows, queued in a stream while the
// worker runs (a customer's events, each an accrual), never run in two of
// its batch transactions at once: a task claimed while a batch holding its
// customer runs waits for that batch to end and runs in the next, instead
// of waiting in the database on the first batch's locks (which made every
// batch wait on the one before). Each task runs once.
func TestBatchesOfOneWorkerNeverHoldTheSameCustomerAtOnce(t *testing.T) {
	url := database(t)
	ctx := context.Background()
	p := open(t, url)
	type custTask struct{ Customer string }
	var overlaps, ran atomic.Int32
	reg := async.NewRegistry()
	reg.HandleTx("test.customer", func(ctx context.Context, tx pgx.Tx, task async.Task) error {
		var ct custTask
		if err := json.Unmarshal(task.Payload, &ct); err != nil {
			return err
		}
		// The customer's "row": a lock held to the end of the transaction.
		// Taken at once when no other transaction holds it; otherwise the
		// overlap is counted and the task waits for it, as on a row.
		var free bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtext($1))`, ct.Customer).Scan(&free); err != nil {
			return err
		}
		if !free {
			overlaps.Add(1)
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, ct.Customer); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.02)`); err != nil {
			return err
		}
		ran.Add(1)
		return effect(ctx, tx, task)
	}, async.Policy{ReadCommitted: true, LockOrder: func(task async.Task) string {
		var ct custTask
		_ = json.Unmarshal(task.Payload, &ct)
		return ct.Customer + "|card"
	}})
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		async.NewWorker(p, reg, async.WorkerOptions{Poll: 5 * time.Millisecond}).Run(wctx)
	}()
	defer func() { stop(); wg.Wait() }()
	const n = 60
	for i := range n {
		err := db.InTx(ctx, p, func(tx pgx.Tx) error {
			_, err := async.Enqueue(ctx, tx, "proj_test", async.NewTask{Kind: "test.customer",
				Payload: custTask{Customer: []string{"ann", "bob"}[i%2]}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitFor(t, 30*time.Second, func() bool { return count(t, p, `SELECT count(*) FROM outbox WHERE status = 'done'`) == n })
	if got := count(t, p, `SELECT count(*) FROM effects`); got != n {
		t.Fatalf("%d effects of %d tasks", got, n)
	}
	if o := overlaps.Load(); o != 0 {
		t.Fatalf("%d of %d task runs found their customer held by another batch of the worker", o, ran.Load())
	}
}

// A task's LockOrder, which decodes its payload, is worked out once: the
// gate that holds a batch's keys and the batch's sort both read it. It was
// worked out twice for every task of a batch (the events bench's accruals
// each decoded their whole payload for it).
func TestATasksLockOrderIsWorkedOutOnce(t *testing.T) {
	url := database(t)
	p := open(t, url)
	enqueue(t, p, "test.ordered", 5)
	var calls atomic.Int32
	reg := async.NewRegistry()
	reg.HandleTx("test.ordered", effect, async.Policy{ReadCommitted: true, LockOrder: func(task async.Task) string {
		calls.Add(1)
		return task.ID
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(ctx)
	waitFor(t, 10*time.Second, func() bool { return count(t, p, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 5 })
	cancel()
	if n := calls.Load(); n != 5 {
		t.Errorf("LockOrder called %d times for 5 tasks, want 5", n)
	}
}
