package async

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
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
	gate   keyGate

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
		pool: pool, reg: reg, o: o, id: ids.New("wrk_"), gate: newKeyGate(),
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
				txTasks = append(txTasks, withOrder(k, t))
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
			w.startBatch(context.WithoutCancel(ctx), &running, release, w.gate.Admit(txTasks))
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

// idleAfter is how long a worker that has claimed nothing and seen nothing
// queued keeps polling at Poll before it slows to IdlePoll: it covers a
// task queued in a transaction still open and retries due within a few
// seconds.
const idleAfter = 2 * time.Second
