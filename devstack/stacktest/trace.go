package stacktest

import (
	"context"
	"sync/atomic"

	exaring "github.com/exaring/otelpgx"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// traced records the spans of the requests RoundTrips sends, once a test
// binary's TestMain called TraceRequests.
var traced atomic.Pointer[tracetest.InMemoryExporter]

// TraceRequests makes the platforms a test binary starts record the spans
// of the requests a test traces (RoundTrips) and only those: the
// process's tracer provider samples a trace only when the request's
// traceparent says so. Call it from TestMain, before any platform starts.
func TraceRequests() {
	spans := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())),
		sdktrace.WithSyncer(spans)))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	traced.Store(spans)
}

// otelpgx is the instrumentation scope of the database's spans.
const otelpgx = "github.com/exaring/otelpgx"

// otelpgxPrepared is the attribute of its spans that prepare a statement.
var otelpgxPrepared = exaring.PrepareStmtNameKey

// RoundTrips sends a traced request and returns its answer and the SQL of
// each round trip to the database made under the span named under (a
// batch's statements joined by "; "), leaving out what is
// made under a span named in skip (work a request starts for later ones,
// such as a cache's refresh). Statements prepared on a connection for the
// first time are not counted.
func (a API) RoundTrips(method, path string, body any, under string, skip ...string) (Resp, []string) {
	a.T.Helper()
	spans := traced.Load()
	if spans == nil {
		a.T.Fatal("stacktest: RoundTrips needs TraceRequests in the test binary's TestMain")
	}
	ctx, root := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "client")
	h := a.P.Header()
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	r := a.E.Do(a.T, method, URL(a.P.Cluster, path), h, body)
	root.End()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	var mine []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID() == root.SpanContext().TraceID() {
			byID[s.SpanContext.SpanID()] = s
			mine = append(mine, s)
		}
	}
	// within says whether s descends from the span named under and from
	// none named in skip.
	within := func(s tracetest.SpanStub) bool {
		for {
			p, ok := byID[s.Parent.SpanID()]
			if !ok {
				return false
			}
			for _, name := range skip {
				if p.Name == name {
					return false
				}
			}
			if p.Name == under {
				return true
			}
			s = p
		}
	}
	var trips []string
	for _, s := range mine {
		if s.InstrumentationScope.Name != otelpgx || !within(s) || prepared(s) {
			continue
		}
		// A batch is one round trip and one span, its statements in its
		// db.query.text (internal/dbtrace).
		switch s.Name {
		case "connect":
		case "batch start":
			trips = append(trips, "batch: "+sqlOf(s))
		default:
			trips = append(trips, sqlOf(s))
		}
	}
	return r, trips
}

// sqlOf is the statement a database span ran.
func sqlOf(s tracetest.SpanStub) string {
	for _, kv := range s.Attributes {
		if kv.Key == "db.query.text" {
			return kv.Value.AsString()
		}
	}
	return s.Name
}

// prepared says whether s prepared a statement (a first use on its
// connection) rather than ran one.
func prepared(s tracetest.SpanStub) bool {
	for _, kv := range s.Attributes {
		if kv.Key == otelpgxPrepared {
			return true
		}
	}
	return false
}
