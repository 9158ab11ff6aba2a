package async_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/regionaltest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// database returns the URL of a fresh, migrated regional database with an
// effects table that test handlers write to.
func database(t *testing.T) string {
	t.Helper()
	url := regionaltest.Database(t)
	p := open(t, url)
	if _, err := p.Exec(context.Background(), `CREATE TABLE effects (task_id TEXT NOT NULL, n INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return url
}

func open(t *testing.T, url string) *db.Pool { return regionaltest.Open(t, url) }

func enqueue(t *testing.T, p *db.Pool, kind string, n int) {
	t.Helper()
	ctx := context.Background()
	err := db.InTx(ctx, p, func(tx pgx.Tx) error {
		for i := 0; i < n; i++ {
			if _, err := async.Enqueue(ctx, tx, "proj_test", async.NewTask{Kind: kind, Payload: map[string]int{"i": i}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// count reads a count in a transaction that is retried on a
// serialization failure: make test's serializable pass runs this package
// at PostgreSQL's SERIALIZABLE, where even a read-only statement beside the
// workers' writes can be refused (CockroachDB retries such a statement
// itself).
func count(t *testing.T, p *db.Pool, sql string) int {
	t.Helper()
	var n int
	if err := db.InTx(context.Background(), p, func(tx pgx.Tx) error { return tx.QueryRow(context.Background(), sql).Scan(&n) }); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not done within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func effect(ctx context.Context, tx pgx.Tx, task async.Task) error {
	_, err := tx.Exec(ctx, `INSERT INTO effects (task_id, n) VALUES ($1, 1)`, task.ID)
	return err
}

func TestTwoReplicasWorkThrough1000TasksWithNoEffectTwice(t *testing.T) {
	url := database(t)
	reg := async.NewRegistry()
	reg.HandleTx("test.effect", effect, async.Policy{})
	check := open(t, url)
	enqueue(t, check, "test.effect", 1000)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ { // two instances: their own pools, one database
		w := async.NewWorker(open(t, url), reg, async.WorkerOptions{Batch: 20, Concurrency: 16, Poll: 10 * time.Millisecond})
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	waitFor(t, 60*time.Second, func() bool { return count(t, check, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 1000 })
	cancel()
	wg.Wait()
	if n := count(t, check, `SELECT count(*) FROM effects`); n != 1000 {
		t.Fatalf("%d effects for 1000 tasks", n)
	}
	if n := count(t, check, `SELECT count(DISTINCT task_id) FROM effects`); n != 1000 {
		t.Fatalf("%d distinct effects", n)
	}
	if n := count(t, check, `SELECT count(DISTINCT lease_owner) FROM outbox`); n != 2 {
		t.Logf("only %d worker(s) took tasks", n)
	}
}

func TestTaskOfAStoppedWorkerIsFinishedByAnotherAndTakesEffectOnce(t *testing.T) {
	url := database(t)
	check := open(t, url)
	enqueue(t, check, "test.effect", 1)

	stuck := make(chan struct{})
	var firstRun atomic.Bool
	reg := async.NewRegistry()
	reg.HandleTx("test.effect", func(ctx context.Context, tx pgx.Tx, task async.Task) error {
		if err := effect(ctx, tx, task); err != nil {
			return err
		}
		if firstRun.CompareAndSwap(false, true) {
			<-stuck // this worker "dies" here, mid-task, with its effect uncommitted
		}
		return nil
	}, async.Policy{})

	lease := 300 * time.Millisecond
	ctxA, stopA := context.WithCancel(context.Background())
	a := async.NewWorker(open(t, url), reg, async.WorkerOptions{Lease: lease, Poll: 10 * time.Millisecond})
	doneA := make(chan struct{})
	go func() { a.Run(ctxA); close(doneA) }()
	waitFor(t, 5*time.Second, firstRun.Load)
	stopA()

	ctxB, stopB := context.WithCancel(context.Background())
	b := async.NewWorker(open(t, url), reg, async.WorkerOptions{Lease: lease, Poll: 10 * time.Millisecond})
	go b.Run(ctxB)
	defer stopB()
	waitFor(t, 10*time.Second, func() bool { return count(t, check, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 1 })

	close(stuck) // the first worker comes back and tries to finish
	<-doneA
	if n := count(t, check, `SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("effect happened %d times", n)
	}
	if n := count(t, check, `SELECT attempts FROM outbox`); n != 2 {
		t.Fatalf("attempts = %d, want 2", n)
	}
}

func TestFailingTaskIsRetriedWithBackoffThenParked(t *testing.T) {
	url := database(t)
	check := open(t, url)
	ctx := context.Background()
	err := db.InTx(ctx, check, func(tx pgx.Tx) error {
		_, err := async.Enqueue(ctx, tx, "proj_test", async.NewTask{Kind: "test.fail", Payload: "x", MaxAttempts: 3})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var runs []time.Time
	reg := async.NewRegistry()
	reg.Handle("test.fail", func(ctx context.Context, task async.Task) async.Outcome {
		mu.Lock()
		runs = append(runs, time.Now())
		mu.Unlock()
		return async.Outcome{Err: fmt.Errorf("receiver said no (attempt %d)", task.Attempt)}
	}, async.Policy{BackoffBase: 200 * time.Millisecond})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(wctx)

	waitFor(t, 10*time.Second, func() bool { return count(t, check, `SELECT count(*) FROM outbox WHERE status = 'parked'`) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	// Delays are 200ms then 400ms, each with ±20% jitter: the lower bounds
	// are 160ms and 320ms whatever the jitter drew.
	if gap1, gap2 := runs[1].Sub(runs[0]), runs[2].Sub(runs[1]); gap1 < 160*time.Millisecond || gap2 < 320*time.Millisecond {
		t.Fatalf("no exponential backoff: gaps %v, %v", gap1, gap2)
	}
	parked, err := async.ListParked(ctx, check, "", "", 10)
	if err != nil || len(parked) != 1 || parked[0].LastError == nil || *parked[0].LastError != "receiver said no (attempt 3)" {
		t.Fatalf("parked: %+v %v", parked, err)
	}
	if err := async.Requeue(ctx, check, "proj_test", parked[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := async.Requeue(ctx, check, "proj_test", parked[0].ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("requeue twice: %v", err)
	}
}

func TestReadCommittedKindsAndWake(t *testing.T) {
	url := database(t)
	ctx := context.Background()
	reg := async.NewRegistry()
	var mu sync.Mutex
	levels := map[string]string{}
	record := func(kind string) async.TxHandler {
		return func(ctx context.Context, tx pgx.Tx, task async.Task) error {
			var iso string
			if err := tx.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&iso); err != nil {
				return err
			}
			mu.Lock()
			levels[kind] = iso
			mu.Unlock()
			return nil
		}
	}
	reg.HandleTx("test.rc", record("test.rc"), async.Policy{ReadCommitted: true})
	reg.HandleTx("test.ser", record("test.ser"), async.Policy{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A poll far longer than the test: only Wake can get the worker going
	// after its first, empty, claim.
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: time.Hour}).Run(wctx)
	time.Sleep(200 * time.Millisecond)
	p := open(t, url)
	enqueue(t, p, "test.rc", 1)
	enqueue(t, p, "test.ser", 1)
	reg.Wake()
	waitFor(t, 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(levels) == 2
	})
	if levels["test.rc"] != "read committed" || levels["test.ser"] != "serializable" {
		t.Fatalf("isolation levels: %v", levels)
	}
}

// Two batches whose tasks lock the same two rows, claimed in opposite
// orders, run in the order of the kind's LockOrder: one batch waits for
// the other, and neither is chosen as a deadlock's victim.
func TestBatchesTakeTheirLocksInLockOrder(t *testing.T) {
	url := database(t)
	ctx := context.Background()
	p := open(t, url)
	if _, err := p.Exec(ctx, `CREATE TABLE rows (k TEXT PRIMARY KEY, n INT NOT NULL DEFAULT 0);
		INSERT INTO rows (k) VALUES ('a'), ('b')`); err != nil {
		t.Fatal(err)
	}
	type lockTask struct{ Row string }
	var deadlocks atomic.Int32
	reg := async.NewRegistry()
	reg.HandleTx("test.lock", func(ctx context.Context, tx pgx.Tx, task async.Task) error {
		var lt lockTask
		if err := json.Unmarshal(task.Payload, &lt); err != nil {
			return err
		}
		// Lock the row, then hold it long enough for the other batch to
		// take its first lock too.
		_, err := tx.Exec(ctx, `UPDATE rows SET n = n + 1 WHERE k = $1`, lt.Row)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			deadlocks.Add(1)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.3)`); err != nil {
			return err
		}
		return effect(ctx, tx, task)
	}, async.Policy{ReadCommitted: true, LockOrder: func(task async.Task) string {
		var lt lockTask
		_ = json.Unmarshal(task.Payload, &lt)
		return lt.Row
	}})
	for _, row := range []string{"a", "b", "b", "a"} {
		err := db.InTx(ctx, p, func(tx pgx.Tx) error {
			_, err := async.Enqueue(ctx, tx, "proj_test", async.NewTask{Kind: "test.lock", Payload: lockTask{Row: row}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	w := async.NewWorker(p, reg, async.WorkerOptions{})
	tasks, err := w.Claim(ctx, 4)
	if err != nil || len(tasks) != 4 {
		t.Fatalf("claimed %d tasks: %v", len(tasks), err)
	}
	row := func(task async.Task) string {
		var lt lockTask
		_ = json.Unmarshal(task.Payload, &lt)
		return lt.Row
	}
	// One batch a then b, the other b then a.
	byRow := map[string][]async.Task{}
	for _, task := range tasks {
		byRow[row(task)] = append(byRow[row(task)], task)
	}
	if len(byRow["a"]) != 2 || len(byRow["b"]) != 2 {
		t.Fatalf("claimed %v", tasks)
	}
	ab := []async.Task{byRow["a"][0], byRow["b"][0]}
	ba := []async.Task{byRow["b"][1], byRow["a"][1]}
	var wg sync.WaitGroup
	for _, batch := range [][]async.Task{ab, ba} {
		wg.Add(1)
		go func() { defer wg.Done(); w.RunTxBatch(ctx, batch) }()
	}
	wg.Wait()
	if n := deadlocks.Load(); n != 0 {
		t.Fatalf("%d deadlocks between the batches", n)
	}
	if n := count(t, p, `SELECT count(*) FROM outbox WHERE status = 'done'`); n != 4 {
		t.Fatalf("%d of 4 tasks done", n)
	}
	if n := count(t, p, `SELECT sum(n) FROM rows`); n != 4 {
		t.Fatalf("rows updated %d times, want 4", n)
	}
}

// A task that panics fails like any other (retried, then parked with the
// panic as its error) while the worker goes on with the rest; before, the
// panic ended the process and the task was claimed again on restart.
func TestPanickingTasksAreParkedAndTheWorkerGoesOn(t *testing.T) {
	url := database(t)
	check := open(t, url)
	ctx := context.Background()
	reg := async.NewRegistry()
	quick := async.Policy{BackoffBase: 10 * time.Millisecond}
	reg.Handle("test.panic.ext", func(ctx context.Context, task async.Task) async.Outcome {
		var fields []string
		return async.Outcome{Note: fields[3]} // index out of range
	}, quick)
	reg.HandleTx("test.panic.tx", func(ctx context.Context, tx pgx.Tx, task async.Task) error {
		if err := effect(ctx, tx, task); err != nil {
			return err
		}
		panic("tx handler bug") // its effect rolls back with it
	}, quick)
	reg.HandleTx("test.effect", effect, async.Policy{})
	err := db.InTx(ctx, check, func(tx pgx.Tx) error {
		for _, kind := range []string{"test.panic.ext", "test.panic.tx"} {
			if _, err := async.Enqueue(ctx, tx, "proj_test", async.NewTask{Kind: kind, Payload: "x", MaxAttempts: 2}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(wctx)

	waitFor(t, 20*time.Second, func() bool { return count(t, check, `SELECT count(*) FROM outbox WHERE status = 'parked'`) == 2 })
	enqueue(t, check, "test.effect", 5) // the worker still serves
	waitFor(t, 20*time.Second, func() bool { return count(t, check, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 5 })
	if n := count(t, check, `SELECT count(*) FROM effects`); n != 5 {
		t.Fatalf("%d effects, want the 5 good tasks' (the panicking one's rolled back)", n)
	}
	for _, want := range []string{"panic: runtime error: index out of range", "panic: tx handler bug"} {
		if n := count(t, check, `SELECT count(*) FROM outbox WHERE status = 'parked' AND attempts = 2 AND last_error LIKE '`+want+`%'`); n != 1 {
			t.Errorf("no task parked after 2 attempts with %q", want)
		}
	}
}
