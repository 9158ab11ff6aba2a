package async

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/runtimex"
)

// WorkerOptions tune a worker; zero values take defaults.
type WorkerOptions struct {
	Batch       int           // tasks claimed at once (default 64)
	Concurrency int           // tasks run at once (default 64)
	Lease       time.Duration // how long a claim holds before another worker may take the task (default 30s)
	Poll        time.Duration // wait between polls when the queue is empty (default 100ms)
	// IdlePoll is the wait between polls once the worker has found no task
	// and seen none queued in its instance for idleAfter (default Poll: no
	// slower). A task queued in the instance (Queue under WithRegistry)
	// brings back Poll at once; one queued by another instance waits for
	// the idle poll.
	IdlePoll time.Duration
	KeepDone time.Duration // finished tasks are deleted after this (default 24h)
	Log      *slog.Logger
}

// Worker claims and runs outbox tasks. Any number of workers, in any number
// of instances, can share one database.
type Worker struct {
	pool   *db.Pool
	reg    *Registry
	o      WorkerOptions
	id     string
	tracer trace.Tracer

	ran    *prometheus.CounterVec
	parked prometheus.Counter
	lag    prometheus.Histogram
}

// NewWorker makes a worker over a regional database.
func NewWorker(pool *db.Pool, reg *Registry, o WorkerOptions) *Worker {
	if o.Batch == 0 {
		o.Batch = 64
	}
	if o.Concurrency == 0 {
		o.Concurrency = 64
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.Poll == 0 {
		o.Poll = 100 * time.Millisecond
	}
	if o.IdlePoll < o.Poll {
		o.IdlePoll = o.Poll
	}
	if o.KeepDone == 0 {
		o.KeepDone = 24 * time.Hour
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Worker{
		pool: pool, reg: reg, o: o, id: ids.New("wrk_"),
		tracer: otel.Tracer("github.com/tallyhq/tally/regional/async"),
		ran: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_outbox_tasks_total",
			Help: "Outbox task runs by kind and outcome (done, retry, parked, lease_lost)."}, []string{"kind", "outcome"}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_outbox_parked_total",
			Help: "Tasks parked after failing too often; list them with the management API."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tally_outbox_lag_seconds",
			Help:    "Time from a task's commit to its successful completion.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 60, 600, 3600}}),
	}
}

// Collectors are the worker's metrics.
func (w *Worker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{w.ran, w.parked, w.lag}
}

// Run claims and runs tasks until ctx ends. Shutdown is graceful: no new
// claims, and the running tasks finish (their own contexts are not
// cancelled); a task that cannot finish keeps its lease until it lapses and
// another worker takes it.
//
// Commits are batched, since a commit is what a task costs most: the
// database-effect tasks of one claim run in one transaction (one by one if
// that fails), and the outcomes of external tasks are gathered and written a
// batch at a time by the committers, each batch's statements pipelined.
func (w *Worker) Run(ctx context.Context) {
	w.reg.seal()
	// Tasks that queue tasks bring the busy pace back too.
	ctx = WithRegistry(ctx, w.reg)
	active := time.Now() // when a task was last claimed or queued here
	sem := make(chan struct{}, w.o.Concurrency)
	freed := make(chan struct{}, 1) // a slot came free: claim again at once
	release := func(n int) {
		for i := 0; i < n; i++ {
			<-sem
		}
		select {
		case freed <- struct{}{}:
		default:
		}
	}
	var running sync.WaitGroup
	outcomes := make(chan completion, w.o.Concurrency)
	// Several committers: a batch is two round trips whatever its size, and
	// batches of different tasks touch different rows.
	var committers sync.WaitGroup
	for i := 0; i < committerCount; i++ {
		committers.Add(1)
		go func() { defer committers.Done(); w.commit(context.WithoutCancel(ctx), outcomes) }()
	}
	defer func() {
		running.Wait()
		close(outcomes)
		committers.Wait()
	}()
	// The purge has its own goroutine: deleting in batches with rests
	// between them, it may take a while, and claims go on meanwhile.
	var purging sync.WaitGroup
	purging.Add(1)
	go func() { defer purging.Done(); w.purge(ctx) }()
	defer purging.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		default:
		}
		n := min(w.o.Batch, w.o.Concurrency-len(sem))
		var tasks []Task
		if n > 0 {
			err := db.Statement(ctx, func(ctx context.Context) error {
				var err error
				tasks, err = claim(ctx, w.pool, w.id, n, w.o.Lease)
				if err == nil {
					err = redactClaimed(ctx, w.pool, tasks)
				}
				return err
			})
			if err != nil && ctx.Err() == nil {
				w.o.Log.Warn("outbox: claiming tasks", "err", err.Error())
			}
			if err != nil {
				// Not run unredacted: claimed again once their leases lapse.
				tasks = nil
			}
		}
		var txTasks []Task
		for _, t := range tasks {
			k, ok := w.kind(t.Kind)
			if ok && k.tx != nil {
				txTasks = append(txTasks, t)
				continue
			}
			sem <- struct{}{}
			running.Add(1)
			go func() {
				defer func() { release(1); running.Done() }()
				// Not ctx: a task under way finishes even when shutdown starts.
				w.runExt(context.WithoutCancel(ctx), t, k, ok, outcomes)
			}()
		}
		if len(txTasks) > 0 {
			for range txTasks {
				sem <- struct{}{}
			}
			running.Add(1)
			go func() {
				defer func() { release(len(txTasks)); running.Done() }()
				w.runTxBatch(context.WithoutCancel(ctx), txTasks)
			}()
		}
		if len(tasks) > 0 {
			active = time.Now()
		}
		if len(tasks) == n && n > 0 {
			continue // more may be due
		}
		if n == 0 { // all slots busy: wait for one, not for the poll
			select {
			case <-ctx.Done():
				return
			case <-freed:
			}
			continue
		}
		if !w.wait(ctx, &active) {
			return
		}
	}
}

// wait waits for the next poll: Poll after it, IdlePoll once the worker has
// been idle for idleAfter, or at once (after wakeGather) when woken by a
// commit. A task being queued in this instance ends an idle wait: the next
// polls are at Poll, which finds it once its transaction commits. It
// reports false when ctx has ended.
func (w *Worker) wait(ctx context.Context, active *time.Time) bool {
	poll := w.o.Poll
	if time.Since(*active) > idleAfter {
		poll = w.o.IdlePoll
	}
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-w.reg.queued:
			*active = time.Now()
			if poll > w.o.Poll { // idle: the busy pace from now
				poll = w.o.Poll
				t.Reset(poll)
			}
		case <-w.reg.wake:
			// Woken: claim soon, but let tasks committed meanwhile gather,
			// so that they are claimed and run as one batch.
			*active = time.Now()
			if poll > wakeGather {
				poll = wakeGather
				t.Reset(poll)
			}
		}
	}
}

// purge deletes the tasks finished more than KeepDone ago every hour until
// ctx ends, in batches (purgeDone).
func (w *Worker) purge(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := runtimex.Call(func() error { _, err := purgeDone(ctx, w.pool, w.o.KeepDone, 0); return err })
			if err != nil && ctx.Err() == nil {
				w.o.Log.Warn("outbox: purging finished tasks", "err", err.Error())
			}
		}
	}
}

func (w *Worker) kind(name string) (kind, bool) {
	if k, ok := w.reg.kinds[name]; ok {
		return k, true
	}
	if fn, ok := w.reg.jobs[strings.TrimPrefix(name, "job:")]; ok && strings.HasPrefix(name, "job:") {
		return kind{ext: w.runJob(fn), policy: Policy{MaxAttempts: 5}.withDefaults()}, true
	}
	return kind{policy: Policy{}.withDefaults()}, false
}

func (w *Worker) span(ctx context.Context, t Task) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("tally.task.kind", t.Kind), attribute.String("tally.task.id", t.ID),
			attribute.String("tally.project", t.ProjectID), attribute.Int("tally.task.attempt", t.Attempt))}
	if t.TraceParent != "" {
		origin := otel.GetTextMapPropagator().Extract(context.Background(), propagation.MapCarrier{"traceparent": t.TraceParent})
		if sc := trace.SpanContextFromContext(origin); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	return w.tracer.Start(ctx, "task "+t.Kind, opts...)
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
		w.runTxGroup(ctx, rc, db.InTxReadCommitted)
	}
	if len(ser) > 0 {
		w.runTxGroup(ctx, ser, db.InTx)
	}
}

// runTxGroup runs tasks in one transaction of inTx, or, when that fails,
// each in its own.
func (w *Worker) runTxGroup(ctx context.Context, ts []Task, inTx func(context.Context, db.Beginner, func(pgx.Tx) error) error) {
	if len(ts) > 1 {
		ts = w.inLockOrder(ts)
		err := inTx(ctx, w.pool, func(tx pgx.Tx) error {
			for _, t := range ts {
				if err := w.runTx(ctx, tx, t); err != nil {
					return err
				}
			}
			held, err := finishMany(ctx, tx, ts)
			if err != nil {
				return err
			}
			if len(held) < len(ts) {
				return errLeaseLost // one-by-one below sorts out which
			}
			return nil
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

// inLockOrder returns ts sorted by their kinds' Policy.LockOrder.
func (w *Worker) inLockOrder(ts []Task) []Task {
	keys := make(map[taskKey]string, len(ts))
	for _, t := range ts {
		if k, _ := w.kind(t.Kind); k.policy.LockOrder != nil {
			keys[t.key()] = k.policy.LockOrder(t)
		}
	}
	if len(keys) == 0 {
		return ts
	}
	sorted := slices.Clone(ts)
	slices.SortStableFunc(sorted, func(a, b Task) int { return strings.Compare(keys[a.key()], keys[b.key()]) })
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

// idleAfter is how long a worker that has claimed nothing and seen nothing
// queued keeps polling at Poll before it slows to IdlePoll: it covers a
// task queued in a transaction still open and retries due within a few
// seconds.
const idleAfter = 2 * time.Second

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
