package async_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tallyhq/tally/regional/async"
)

// A batch's transaction costs one round trip of its own, beside its tasks'
// statements: the BEGIN goes with the first task's first statement, the
// COMMIT with the finishes. It took three (BEGIN, the finishes, COMMIT).
func TestABatchTransactionCostsOneRoundTripOfItsOwn(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	url := database(t)
	p := open(t, url)
	enqueue(t, p, "test.trips", 5)
	reg := async.NewRegistry()
	reg.HandleTx("test.trips", effect, async.Policy{ReadCommitted: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go async.NewWorker(open(t, url), reg, async.WorkerOptions{Poll: 10 * time.Millisecond}).Run(ctx)
	waitFor(t, 10*time.Second, func() bool { return count(t, p, `SELECT count(*) FROM effects`) == 5 })
	cancel()
	// The transaction whose round trips include the finishes, and its own
	// round trips (its tasks' are under their own spans).
	all := spans.GetSpans()
	children := map[trace.SpanID][]tracetest.SpanStub{}
	for _, s := range all {
		children[s.Parent.SpanID()] = append(children[s.Parent.SpanID()], s)
	}
	found := false
	for _, s := range all {
		if s.Name != "db.InTx" && s.Name != "db.InPipe" {
			continue
		}
		var trips []string
		finishes := false
		for _, c := range children[s.SpanContext.SpanID()] {
			if c.InstrumentationScope.Name != "github.com/exaring/otelpgx" {
				continue
			}
			q := queryText(c)
			trips = append(trips, q)
			finishes = finishes || strings.Contains(q, "status = 'done'")
		}
		if !finishes {
			continue
		}
		found = true
		if len(trips) != 1 {
			t.Errorf("the batch's transaction took %d round trips of its own, want 1:\n%s", len(trips), strings.Join(trips, "\n---\n"))
		}
	}
	if !found {
		t.Fatal("no transaction span holds the finishes of the tasks as its own round trip")
	}
}

func queryText(s tracetest.SpanStub) string {
	for _, kv := range s.Attributes {
		if kv.Key == "db.query.text" {
			return kv.Value.AsString()
		}
	}
	return s.Name
}
