// Package dbtrace traces the database's round trips: a span per query run
// alone and one per batch, the batch's statements written on its span.
//
// It wraps otelpgx, which makes a span per statement queued in a batch and
// one per connection acquired from the pool: with every request sampled,
// those spans cost about a sixth of a validation's CPU (issue 39), and they
// say nothing a trace needs, since a batch is one round trip whose
// statements can be listed on its own span, and an acquire on a warm pool
// takes no time worth a span (the pool's wait shows in its parent's).
package dbtrace

import (
	"context"
	"strings"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Tracer is otelpgx's tracer without its spans per batched statement and
// per acquire.
type Tracer struct {
	*otelpgx.Tracer
}

// New is the tracer of a pool; opts come after the defaults (the span named
// by the statement's operation, no connection details, no acquire spans).
func New(opts ...otelpgx.Option) *Tracer {
	// Connection details (host, port, database) would be the same on every
	// span, and reading them copies the connection's whole config each time.
	defaults := []otelpgx.Option{otelpgx.WithTrimSQLInSpanName(), otelpgx.WithDisableConnectionDetailsInAttributes(),
		otelpgx.WithDisableAcquireTracer()}
	return &Tracer{otelpgx.NewTracer(append(defaults, opts...)...)}
}

// TraceBatchStart starts the batch's span, with its statements as its
// db.query.text, separated by "; " as OpenTelemetry's conventions write a
// batch of different statements.
func (t *Tracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	ctx = t.Tracer.TraceBatchStart(ctx, conn, data)
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || data.Batch == nil {
		return ctx
	}
	n := 0
	for _, q := range data.Batch.QueuedQueries {
		n += len(q.SQL) + 2
	}
	var b strings.Builder
	b.Grow(n)
	for i, q := range data.Batch.QueuedQueries {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(q.SQL)
	}
	span.SetAttributes(semconv.DBQueryText(b.String()))
	return ctx
}

// batchQueryFailed is the event a batch's span records for a statement that
// failed, with the statement and its error.
const batchQueryFailed = "batch query failed"

// TraceBatchQuery records a failed statement on the batch's span, in place
// of otelpgx's span per statement; a statement that succeeded is already
// listed in the batch's db.query.text.
func (t *Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if data.Err == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(batchQueryFailed, trace.WithAttributes(semconv.DBQueryText(data.SQL),
		attribute.String("exception.message", data.Err.Error())))
	span.SetStatus(codes.Error, data.Err.Error())
}
