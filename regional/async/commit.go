package async

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/runtimex"
)

// commit writes outcomes a batch at a time: whatever has arrived, up to 256,
// in one transaction; one by one if the batch fails.
func (w *Worker) commit(ctx context.Context, in <-chan completion) {
	for c := range in {
		batch := []completion{c}
	gather:
		for len(batch) < 256 {
			select {
			case c, ok := <-in:
				if !ok {
					break gather
				}
				batch = append(batch, c)
			default:
				break gather
			}
		}
		if len(batch) > 1 {
			var held map[taskKey]bool
			err := db.InTxReadCommitted(ctx, w.pool, func(tx pgx.Tx) error {
				// A panicking Recorder fails the batch, not the committer.
				return runtimex.Call(func() error {
					var err error
					held, err = w.record(ctx, tx, batch)
					return err
				})
			})
			if err == nil {
				w.recorded(ctx, batch, held)
				continue
			}
		}
		for i := range batch {
			one := batch[i : i+1]
			var held map[taskKey]bool
			err := db.InTxReadCommitted(ctx, w.pool, func(tx pgx.Tx) error {
				// A panicking Recorder fails the batch, not the committer.
				return runtimex.Call(func() error {
					var err error
					held, err = w.record(ctx, tx, one)
					return err
				})
			})
			if err != nil {
				w.failed(ctx, one[0].t, one[0].policy, err)
				continue
			}
			w.recorded(ctx, one, held)
		}
	}
}

// record finishes or reschedules a batch of tries and writes what they
// left, returning the tasks this worker still held (a task whose lease
// lapsed belongs to another worker now, and its try leaves nothing). The
// successful tries are finished with one statement, and a kind with a
// Recorder writes its tries with one call.
func (w *Worker) record(ctx context.Context, tx pgx.Tx, batch []completion) (map[taskKey]bool, error) {
	b := &pgx.Batch{}
	ts := make([]Task, len(batch))
	for i := range batch {
		c := &batch[i]
		ts[i] = c.t
		if c.out.Err == nil {
			queueFinish(b, c.t)
		} else {
			c.parked = queueRetry(b, c.t, c.policy, c.out.Err, rand.Float64())
		}
	}
	held, err := heldOf(ctx, tx, b, ts)
	if err != nil {
		return nil, err
	}
	var tries map[string][]Try
	recorders := map[string]Recorder{}
	for _, c := range batch {
		if !held[c.t.key()] {
			continue
		}
		if c.out.Record != nil {
			if err := c.out.Record(ctx, tx); err != nil {
				return nil, err
			}
		}
		if c.record != nil {
			if tries == nil {
				tries = map[string][]Try{}
			}
			tries[c.t.Kind] = append(tries[c.t.Kind], Try{Task: c.t, Err: c.out.Err, Note: c.out.Note})
			recorders[c.t.Kind] = c.record
		}
	}
	if len(tries) > 0 {
		rb := &pgx.Batch{}
		for k, ts := range tries {
			recorders[k](rb, ts)
		}
		if err := tx.SendBatch(ctx, rb).Close(); err != nil {
			return nil, err
		}
	}
	return held, nil
}

func (w *Worker) recorded(ctx context.Context, cs []completion, held map[taskKey]bool) {
	for _, c := range cs {
		switch {
		case !held[c.t.key()]:
			w.ran.WithLabelValues(c.t.Kind, "lease_lost").Inc()
		case c.out.Err == nil:
			w.done(c.t)
		default:
			w.countFailure(ctx, c.t, c.out.Err, c.parked)
		}
	}
}

// failed reschedules or parks a task whose run failed.
func (w *Worker) failed(ctx context.Context, t Task, p Policy, cause error) {
	if errors.Is(cause, errLeaseLost) {
		w.ran.WithLabelValues(t.Kind, "lease_lost").Inc()
		return
	}
	var parked bool
	err := db.InTxReadCommitted(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		parked, err = retry(ctx, tx, t, p, cause, rand.Float64())
		return err
	})
	switch {
	case errors.Is(err, errLeaseLost):
		w.ran.WithLabelValues(t.Kind, "lease_lost").Inc()
	case err != nil:
		w.o.Log.ErrorContext(ctx, "outbox: recording a failed task", "task", t.ID, "err", err.Error())
	default:
		w.countFailure(ctx, t, cause, parked)
	}
}

func (w *Worker) countFailure(ctx context.Context, t Task, cause error, parked bool) {
	if !parked {
		w.ran.WithLabelValues(t.Kind, "retry").Inc()
		return
	}
	w.ran.WithLabelValues(t.Kind, "parked").Inc()
	w.parked.Inc()
	w.o.Log.WarnContext(ctx, "outbox: task parked", "task", t.ID, "kind", t.Kind, "project", t.ProjectID,
		"attempts", t.Attempt, "err", cause.Error())
}

// heartbeat extends t's lease every third of it until ctx ends.
func (w *Worker) heartbeat(ctx context.Context, t Task) {
	tick := time.NewTicker(w.o.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := extendLease(ctx, w.pool, t, w.o.Lease); err != nil && ctx.Err() == nil {
				w.o.Log.Warn("outbox: extending a lease", "task", t.ID, "err", err.Error())
			}
		}
	}
}

// logPanic logs a task's panic with its stack; other errors are the
// task's record's business.
func (w *Worker) logPanic(ctx context.Context, t Task, err error) {
	var pe *runtimex.PanicError
	if errors.As(err, &pe) {
		w.o.Log.ErrorContext(ctx, "outbox: task panicked", "task", t.ID, "kind", t.Kind, "project", t.ProjectID,
			"attempt", t.Attempt, "err", pe)
	}
}

func (w *Worker) done(t Task) {
	w.ran.WithLabelValues(t.Kind, "done").Inc()
	w.lag.Observe(time.Since(t.CreatedAt).Seconds())
}
