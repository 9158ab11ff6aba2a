package dbtrace_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/dbtrace"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// traced opens a pool on a new database whose spans go to the returned
// exporter, and a context whose every span is sampled.
func traced(t *testing.T) (*pgxpool.Pool, *tracetest.InMemoryExporter, context.Context, func()) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	cfg, err := pgxpool.ParseConfig(dbtest.Shared(t, "main").NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = dbtrace.New(otelpgx.WithTracerProvider(tp))
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx, root := tp.Tracer("test").Start(context.Background(), "request")
	return pool, spans, ctx, func() { root.End() }
}

// run is what the database's spans under the request say ran: each span's
// name and its statements, leaving out the pool's first connection and
// statements prepared on a connection for the first time.
func run(spans *tracetest.InMemoryExporter) []string {
	var got []string
	for _, s := range spans.GetSpans() {
		if s.InstrumentationScope.Name != "github.com/exaring/otelpgx" || s.Name == "connect" {
			continue
		}
		text, prepared := "", false
		for _, kv := range s.Attributes {
			switch kv.Key {
			case "db.query.text":
				text = kv.Value.AsString()
			case otelpgx.PrepareStmtNameKey:
				prepared = true
			}
		}
		if !prepared {
			got = append(got, s.Name+": "+text)
		}
	}
	return got
}

// A batch is one span holding its statements, as it is one round trip; a
// query run alone has its own; acquiring a connection from the pool has
// none. otelpgx alone made a span per batched statement and per acquire.
func TestABatchIsOneSpanListingItsStatements(t *testing.T) {
	pool, spans, ctx, end := traced(t)
	b := &pgx.Batch{}
	b.Queue(`SELECT 1`)
	b.Queue(`SELECT $1::int`, 2)
	b.Queue(`SELECT 'three'`)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT 4`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	end()
	got := strings.Join(run(spans), "\n")
	want := "batch start: SELECT 1; SELECT $1::int; SELECT 'three'\nSELECT: SELECT 4"
	if got != want {
		t.Fatalf("spans:\n%s\nwant:\n%s", got, want)
	}
}

// A statement of a batch that fails is named on the batch's span, with
// its error, and the span's status is the error.
func TestABatchsFailedStatementIsRecordedOnItsSpan(t *testing.T) {
	pool, spans, ctx, end := traced(t)
	b := &pgx.Batch{}
	b.Queue(`SELECT 1`)
	b.Queue(`SELECT 1/0`)
	if err := pool.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("a division by zero succeeded")
	}
	end()
	for _, s := range spans.GetSpans() {
		if s.Name != "batch start" {
			continue
		}
		if s.Status.Description == "" {
			t.Errorf("the batch's span has no error status: %+v", s.Status)
		}
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				if e.Name == "batch query failed" && kv.Key == "db.query.text" && kv.Value.AsString() == "SELECT 1/0" {
					return
				}
			}
		}
		t.Fatalf("no event names the failed statement: %+v", s.Events)
	}
	t.Fatalf("no batch span: %v", run(spans))
}

// BenchmarkBatch sends a batch of four statements from a sampled request,
// the spans going to a batching processor as the services' do, traced by
// otelpgx alone and by this package: the CPU its spans save (issue 39), as the process's CPU a batch.
//
//	go test -run - -bench Batch -benchtime 2000x ./internal/dbtrace
func BenchmarkBatch(b *testing.B) {
	for _, tc := range []struct {
		name   string
		tracer func(tp *sdktrace.TracerProvider) pgx.QueryTracer
	}{
		{"otelpgx", func(tp *sdktrace.TracerProvider) pgx.QueryTracer {
			return otelpgx.NewTracer(otelpgx.WithTracerProvider(tp), otelpgx.WithDisableConnectionDetailsInAttributes())
		}},
		{"dbtrace", func(tp *sdktrace.TracerProvider) pgx.QueryTracer { return dbtrace.New(otelpgx.WithTracerProvider(tp)) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			cfg, err := pgxpool.ParseConfig(dbtest.Shared(b, "main").NewDatabase(b))
			if err != nil {
				b.Fatal(err)
			}
			cfg.ConnConfig.Tracer = tc.tracer(tp)
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			ctx, root := tp.Tracer("test").Start(context.Background(), "request")
			defer root.End()
			var before syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			for b.Loop() {
				batch := &pgx.Batch{}
				batch.Queue(`SELECT 1`)
				batch.Queue(`SELECT $1::int`, 2)
				batch.Queue(`SELECT $1::text`, "three")
				batch.Queue(`SELECT 4 WHERE $1`, true)
				if err := pool.SendBatch(ctx, batch).Close(); err != nil {
					b.Fatal(err)
				}
			}
			var after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
