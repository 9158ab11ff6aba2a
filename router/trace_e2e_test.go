package router_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func TestOneTraceFollowsARequestFromRouterToDatabase(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	p := e.CreateProject(t, "us1")

	// The client starts the trace, as an instrumented SDK would.
	ctx, root := otel.Tracer("test").Start(context.Background(), "client")
	h := p.Header()
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	r := e.Do(t, "POST", stacktest.URL("us1", "/v1/customers"), h, map[string]any{"source_id": "traced"})
	root.End()
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	traceID := root.SpanContext().TraceID()

	var mine []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.SpanContext.TraceID() == traceID {
			mine = append(mine, s)
		}
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range mine {
		byID[s.SpanContext.SpanID()] = s
	}
	parentOf := func(s tracetest.SpanStub) (tracetest.SpanStub, bool) {
		p, ok := byID[s.Parent.SpanID()]
		return p, ok
	}
	find := func(pred func(tracetest.SpanStub) bool, what string) tracetest.SpanStub {
		for _, s := range mine {
			if pred(s) {
				return s
			}
		}
		names := []string{}
		for _, s := range mine {
			names = append(names, s.InstrumentationScope.Name+":"+s.Name)
		}
		t.Fatalf("no %s span in the trace; spans: %v", what, names)
		return tracetest.SpanStub{}
	}
	attr := func(s tracetest.SpanStub, key string) string {
		for _, a := range s.Attributes {
			if string(a.Key) == key {
				return a.Value.Emit()
			}
		}
		return ""
	}
	const echoScope = "go.opentelemetry.io/contrib/instrumentation/github.com/labstack/echo/otelecho"
	routerServer := find(func(s tracetest.SpanStub) bool {
		return s.SpanKind == trace.SpanKindServer && s.Parent.SpanID() == root.SpanContext().SpanID()
	}, "router server")
	// The router's server span is the request's one span there, and the
	// regional server span is its child.
	regionalServer := find(func(s tracetest.SpanStub) bool {
		return s.InstrumentationScope.Name == echoScope && s.Parent.SpanID() == routerServer.SpanContext.SpanID()
	}, "regional server")
	if got := attr(routerServer, "tally.upstream"); got != "cluster us1" {
		t.Fatalf("router span's tally.upstream = %q, want the cluster it forwarded to", got)
	}
	if got := attr(routerServer, "tally.api_version"); got == "" {
		t.Fatalf("router span carries no tally.api_version")
	}
	if regionalServer.SpanKind != trace.SpanKindServer {
		t.Fatalf("regional span kind %v", regionalServer.SpanKind)
	}
	// Database queries nest under the regional server span, through the
	// service and transaction spans.
	descends := func(s tracetest.SpanStub) []string {
		chain := []string{s.Name}
		for s.SpanContext.SpanID() != regionalServer.SpanContext.SpanID() {
			parent, ok := parentOf(s)
			if !ok {
				return nil
			}
			chain = append(chain, parent.Name)
			s = parent
		}
		return chain
	}
	queries := 0
	for _, s := range mine {
		if s.InstrumentationScope.Name == "github.com/exaring/otelpgx" && s.Name != "pool.acquire" {
			if chain := descends(s); chain != nil {
				queries++
				t.Logf("%v", chain)
			}
		}
	}
	if queries == 0 {
		t.Fatalf("no database query span descends from the regional server span")
	}
	if r.Header.Get("Traceparent") != "" {
		t.Fatalf("trace context leaked into the response")
	}
}

// A domain operation that fails ends its span with the error recorded and
// the span's status an error, so a trace shows which step refused.
func TestDomainSpansCarryTheirErrors(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	for _, c := range []struct{ method, path, span string }{
		{"POST", "/v1/loyalties/members/LC-NOPE/balance", "loyalty.UpdateBalance"},
		{"DELETE", "/v1/products/prod_nope", "products.DeleteProduct"},
		{"PUT", "/v1/products/prod_nope", "products.UpdateProduct"},
	} {
		ctx, root := otel.Tracer("test").Start(context.Background(), "client")
		h := a.P.Header()
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
		r := e.Do(t, c.method, stacktest.URL("api", c.path), h, map[string]any{"points": 5, "name": "x"})
		root.End()
		if r.Status != 404 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.Status, r.Body)
		}
		found := false
		for _, s := range spans.GetSpans() {
			if s.SpanContext.TraceID() != root.SpanContext().TraceID() || s.Name != c.span {
				continue
			}
			found = true
			if s.Status.Code != codes.Error || len(s.Events) == 0 || s.Events[0].Name != "exception" {
				t.Errorf("%s: status %v, events %v; want the error recorded", c.span, s.Status, s.Events)
			}
		}
		if !found {
			t.Errorf("no %s span in the trace", c.span)
		}
	}
}
