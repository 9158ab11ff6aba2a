package async_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
)

func TestTaskSpanLinksToTheRequestThatWroteIt(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	url := database(t)
	p := open(t, url)
	ctx, req := tp.Tracer("test").Start(context.Background(), "POST /v1/customers")
	err := db.InTx(ctx, p, func(tx pgx.Tx) error {
		_, err := async.Enqueue(ctx, tx, "proj_t", async.NewTask{Kind: "test.effect", Payload: 1})
		return err
	})
	req.End()
	if err != nil {
		t.Fatal(err)
	}
	reg := async.NewRegistry()
	reg.HandleTx("test.effect", effect, async.Policy{})
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(wctx)
	waitFor(t, 5*time.Second, func() bool {
		for _, s := range spans.GetSpans() {
			if s.Name == "task test.effect" {
				if len(s.Links) != 1 || s.Links[0].SpanContext.TraceID() != req.SpanContext().TraceID() ||
					s.Links[0].SpanContext.SpanID() != req.SpanContext().SpanID() {
					t.Fatalf("task span links %v, want the request's span", s.Links)
				}
				return true
			}
		}
		return false
	})
}
