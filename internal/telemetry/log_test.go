package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/tallyhq/tally/internal/identity"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestLogRecordsCarryTraceAndRequestIDs(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, 0).With("service", "test")
	tp := sdktrace.NewTracerProvider()
	who := identity.With(context.Background(), identity.Identity{ProjectID: "proj_1", APIVersion: "v2017-04-20"})
	ctx, span := tp.Tracer("t").Start(WithRequestID(who, "v-123"), "op")
	log.InfoContext(ctx, "hello", "k", 1)
	span.End()

	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not JSON: %v: %s", err, buf.String())
	}
	if rec["trace_id"] != span.SpanContext().TraceID().String() || rec["span_id"] != span.SpanContext().SpanID().String() ||
		rec["request_id"] != "v-123" || rec["service"] != "test" || rec["msg"] != "hello" ||
		rec["project_id"] != "proj_1" || rec["api_version"] != "v2017-04-20" {
		t.Fatalf("record %v", rec)
	}
}
