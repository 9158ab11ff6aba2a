package async

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
)

// WorkerOptions tune a worker; zero values take defaults.
type WorkerOptions struct {
	Batch       int           // tasks claimed at once (default 64)
	Concurrency int           // tasks run at once (default 64)
	Lease       time.Duration // how long a claim holds before another worker may take the task (default 30s)
	Poll        time.Duration // wait between polls when the queue is empty (default 100ms)
	KeepDone    time.Duration // finished tasks are deleted after this (default 24h)
	Log         *slog.Logger
}

// Worker claims and runs outbox tasks. Any number of workers, in any number
// of instances, can share one database.
type Worker struct {
	pool   *pgxpool.Pool
	reg    *Registry
	o      WorkerOptions
	id     string
	tracer trace.Tracer

	ran    *prometheus.CounterVec
	parked prometheus.Counter
	lag    prometheus.Histogram
}

// NewWorker makes a worker over a regional database.
func NewWorker(pool *pgxpool.Pool, reg *Registry, o WorkerOptions) *Worker {
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
func (w *Worker) Run(ctx context.Context) {
	sem := make(chan struct{}, w.o.Concurrency)
	var running sync.WaitGroup
	defer running.Wait()
	purge := time.NewTicker(time.Hour)
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-purge.C:
			if err := purgeDone(ctx, w.pool, w.o.KeepDone); err != nil && ctx.Err() == nil {
				w.o.Log.Warn("outbox: purging finished tasks", "err", err.Error())
			}
		default:
		}
		free := w.o.Concurrency - len(sem)
		n := min(w.o.Batch, free)
		var tasks []Task
		if n > 0 {
			err := db.InTx(ctx, w.pool, func(tx pgx.Tx) error {
				var err error
				tasks, err = claim(ctx, tx, w.id, n, w.o.Lease)
				return err
			})
			if err != nil && ctx.Err() == nil {
				w.o.Log.Warn("outbox: claiming tasks", "err", err.Error())
			}
		}
		for _, t := range tasks {
			sem <- struct{}{}
			running.Add(1)
			go func() {
				defer func() { <-sem; running.Done() }()
				// Not ctx: a task under way finishes even when shutdown starts.
				w.run(context.WithoutCancel(ctx), t)
			}()
		}
		if len(tasks) == n && n > 0 {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.o.Poll):
		}
	}
}

func (w *Worker) run(ctx context.Context, t Task) {
	k, ok := w.reg.kinds[t.Kind]
	if fn, isJob := w.reg.jobs[strings.TrimPrefix(t.Kind, "job:")]; !ok && isJob && strings.HasPrefix(t.Kind, "job:") {
		k, ok = kind{ext: w.runJob(fn), policy: Policy{MaxAttempts: 5}.withDefaults()}, true
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("tally.task.kind", t.Kind), attribute.String("tally.task.id", t.ID),
			attribute.String("tally.project", t.ProjectID), attribute.Int("tally.task.attempt", t.Attempt))}
	if t.TraceParent != "" {
		origin := otel.GetTextMapPropagator().Extract(context.Background(), propagation.MapCarrier{"traceparent": t.TraceParent})
		if sc := trace.SpanContextFromContext(origin); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	ctx, span := w.tracer.Start(ctx, "task "+t.Kind, opts...)
	defer span.End()

	var err error
	switch {
	case !ok:
		err = fmt.Errorf("async: no handler for task kind %q", t.Kind)
		k.policy = Policy{}.withDefaults()
	case k.tx != nil:
		err = db.InTx(ctx, w.pool, func(tx pgx.Tx) error {
			if err := k.tx(ctx, tx, t); err != nil {
				return err
			}
			return finish(ctx, tx, t)
		})
		if err == nil {
			w.done(t)
			return
		}
	default:
		// A long external task keeps its lease alive while it runs.
		hctx, stopHeartbeat := context.WithCancel(ctx)
		go w.heartbeat(hctx, t)
		out := k.ext(ctx, t)
		stopHeartbeat()
		err = db.InTx(ctx, w.pool, func(tx pgx.Tx) error {
			if out.Record != nil {
				if err := out.Record(ctx, tx); err != nil {
					return err
				}
			}
			if out.Err != nil {
				return nil
			}
			return finish(ctx, tx, t)
		})
		if err == nil && out.Err == nil {
			w.done(t)
			return
		}
		if err == nil {
			err = out.Err
		}
	}
	if errors.Is(err, errLeaseLost) {
		w.ran.WithLabelValues(t.Kind, "lease_lost").Inc()
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	var parked bool
	cause := err
	rerr := db.InTx(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		parked, err = retry(ctx, tx, t, k.policy, cause, rand.Float64())
		return err
	})
	switch {
	case errors.Is(rerr, errLeaseLost):
		w.ran.WithLabelValues(t.Kind, "lease_lost").Inc()
	case rerr != nil:
		w.o.Log.ErrorContext(ctx, "outbox: recording a failed task", "task", t.ID, "err", rerr.Error())
	case parked:
		w.ran.WithLabelValues(t.Kind, "parked").Inc()
		w.parked.Inc()
		w.o.Log.WarnContext(ctx, "outbox: task parked", "task", t.ID, "kind", t.Kind, "project", t.ProjectID,
			"attempts", t.Attempt, "err", err.Error())
	default:
		w.ran.WithLabelValues(t.Kind, "retry").Inc()
	}
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

func (w *Worker) done(t Task) {
	w.ran.WithLabelValues(t.Kind, "done").Inc()
	w.lag.Observe(time.Since(t.CreatedAt).Seconds())
}
