// Package telemetry sets up what every service reports: OpenTelemetry traces
// (OTLP export from the standard OTEL_* variables, W3C trace context), JSON
// logs through log/slog carrying trace and request ids, and Prometheus
// metrics served with health and readiness on an internal port.
package telemetry
