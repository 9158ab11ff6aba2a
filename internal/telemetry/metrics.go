package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one service's Prometheus registry and its HTTP metrics.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics makes a registry whose series all carry service (and cluster,
// where the service has one) as constant labels.
func NewMetrics(service, cluster string) *Metrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"service": service}
	if cluster != "" {
		labels["cluster"] = cluster
	}
	wrapped := prometheus.WrapRegistererWith(labels, reg)
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_http_requests_total", Help: "HTTP requests served, by method, route and status.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tally_http_request_duration_seconds", Help: "Time to serve HTTP requests.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route"}),
	}
	wrapped.MustRegister(m.requests, m.duration)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Requests is how many requests tally_http_requests_total has counted with
// method, route and status code; an empty one matches any.
func (m *Metrics) Requests(method, route, code string) float64 {
	fams, _ := m.Registry.Gather()
	var n float64
	for _, f := range fams {
		if f.GetName() != "tally_http_requests_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			match := true
			for _, l := range s.GetLabel() {
				want := map[string]string{"method": method, "route": route, "code": code}[l.GetName()]
				match = match && (want == "" || want == l.GetValue())
			}
			if match {
				n += s.GetCounter().GetValue()
			}
		}
	}
	return n
}

// Register adds collectors under the service's constant labels.
func (m *Metrics) Register(cs ...prometheus.Collector) {
	m.Registry.MustRegister(cs...)
}

// Middleware records every request's count and duration.
func (m *Metrics) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			status := c.Response().Status
			if err != nil && !c.Response().Committed {
				var he *echo.HTTPError
				if errors.As(err, &he) {
					status = he.Code
				} else if sc, ok := err.(interface{ StatusCode() int }); ok {
					status = sc.StatusCode()
				}
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			m.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Inc()
			m.duration.WithLabelValues(c.Request().Method, route).Observe(time.Since(start).Seconds())
			return err
		}
	}
}

// ServeAdmin serves /metrics, /healthz (the process is up) and /readyz (ready
// reports nil when the service can do its work) on addr until ctx ends.
func ServeAdmin(ctx context.Context, addr string, m *Metrics, ready func(context.Context) error, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if ready != nil {
			if err := ready(rctx); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("admin endpoints listening", "addr", l.Addr().String())
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
