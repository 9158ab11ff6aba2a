package async

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/runtimex"
	"github.com/tallyhq/tally/internal/txshared"
)

// startBatch runs a batch of database-effect tasks the gate admitted, then,
// in the same goroutine, each batch the gate lets go when the one before
// ends; each task's slot is released when its batch has run.
func (w *Worker) startBatch(ctx context.Context, running *sync.WaitGroup, release func(int), ts []Task) {
	if len(ts) == 0 {
		return
	}
	running.Add(1)
	go func() {
		defer running.Done()
		for len(ts) > 0 {
			w.runTxBatch(ctx, ts)
			next := w.gate.Done(ts)
			release(len(ts))
			ts = next
		}
	}()
}

// runTxBatch runs database-effect tasks in one transaction, which marks
// them all done with one statement at its end; if that fails, it runs them
// one at a time so that one bad task does not hold the others.
//
// The handlers run before the outbox rows are touched: a worker that hangs
// in a handler holds no lock on its tasks, so they are due again when its
// lease lapses.
func (w *Worker) runTxBatch(ctx context.Context, ts []Task) {
	// Tasks of each isolation run together.
	var rc, ser []Task
	for _, t := range ts {
		if k, _ := w.kind(t.Kind); k.policy.ReadCommitted {
			rc = append(rc, t)
		} else {
			ser = append(ser, t)
		}
	}
	if len(rc) > 0 {
		w.runTxGroup(ctx, rc, pgx.ReadCommitted)
	}
	if len(ser) > 0 {
		w.runTxGroup(ctx, ser, pgx.Serializable)
	}
}

// runTxGroup runs tasks in one transaction at iso, or, when that fails,
// each in its own. The batch's transaction is a db.InPipe: its BEGIN goes
// with the first task's first statement and its COMMIT with the finishes,
// each of which fails it when the task's lease was lost (one-by-one below
// sorts out which): two round trips a batch fewer than InTx's.
func (w *Worker) runTxGroup(ctx context.Context, ts []Task, iso pgx.TxIsoLevel) {
	inTx := db.InTx
	if iso == pgx.ReadCommitted {
		inTx = db.InTxReadCommitted
	}
	if len(ts) > 1 {
		ts = w.inLockOrder(ts)
		err := db.InPipe(ctx, w.pool, iso, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
			ctx = txshared.With(ctx) // the batch's shared values (txshared.Get)
			for _, t := range ts {
				if err := w.runTx(ctx, p.Tx(), t); err != nil {
					return nil, err
				}
			}
			b := &pgx.Batch{}
			for _, t := range ts {
				db.QueueChange(b, errLeaseLost, finishSQL, t.ProjectID, t.ID, t.owner, t.Attempt)
			}
			return b, nil
		})
		if err == nil {
			for _, t := range ts {
				w.done(t)
			}
			return
		}
	}
	for _, t := range ts {
		err := inTx(ctx, w.pool, func(tx pgx.Tx) error {
			if err := w.runTx(ctx, tx, t); err != nil {
				return err
			}
			return finish(ctx, tx, t)
		})
		if err == nil {
			w.done(t)
			continue
		}
		k, _ := w.kind(t.Kind)
		w.failed(ctx, t, k.policy, err)
	}
}

// withOrder is t with its kind's lock order worked out (Task.order): once
// a task, when it is claimed.
func withOrder(k kind, t Task) Task {
	if k.policy.LockOrder != nil {
		t.order = k.policy.LockOrder(t)
	}
	return t
}

// inLockOrder returns ts sorted by their kinds' Policy.LockOrder, worked
// out when they were claimed (Task.order).
func (w *Worker) inLockOrder(ts []Task) []Task {
	if !slices.ContainsFunc(ts, func(t Task) bool { return t.order != "" }) {
		return ts
	}
	sorted := slices.Clone(ts)
	slices.SortStableFunc(sorted, func(a, b Task) int { return strings.Compare(a.order, b.order) })
	return sorted
}

// runTx runs one database-effect task's handler in tx.
func (w *Worker) runTx(ctx context.Context, tx pgx.Tx, t Task) error {
	ctx, span := w.span(ctx, t)
	defer span.End()
	k, _ := w.kind(t.Kind)
	// A panic fails the task (its transaction rolls back), not the process.
	if err := runtimex.Call(func() error { return k.tx(ctx, tx, t) }); err != nil {
		w.logPanic(ctx, t, err)
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	return nil
}

const committerCount = 8

// wakeGather is how long a woken worker waits before it claims: tasks
// committed in that time are claimed and run together. Claiming each task
// alone costs more transactions than the wait saves.
const wakeGather = 20 * time.Millisecond

type completion struct {
	t      Task
	out    Outcome
	policy Policy
	record Recorder
	parked bool // set by record: the failed try was the last
}

// runExt runs an external-effect task and hands its outcome to the committer.
func (w *Worker) runExt(ctx context.Context, t Task, k kind, known bool, outcomes chan<- completion) {
	ctx, span := w.span(ctx, t)
	defer span.End()
	var out Outcome
	if !known {
		out = Outcome{Err: fmt.Errorf("async: no handler for task kind %q", t.Kind)}
	} else {
		// A long external task keeps its lease alive while it runs.
		hctx, stopHeartbeat := context.WithCancel(ctx)
		go w.heartbeat(hctx, t)
		if err := runtimex.Call(func() error { out = k.ext(ctx, t); return nil }); err != nil {
			w.logPanic(ctx, t, err)
			out = Outcome{Err: err} // retried with backoff, then parked, as any failure
		}
		stopHeartbeat()
	}
	if out.Err != nil {
		span.RecordError(out.Err)
		span.SetStatus(codes.Error, out.Err.Error())
	}
	outcomes <- completion{t: t, out: out, policy: k.policy, record: k.record}
}
