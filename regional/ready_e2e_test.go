package regional_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/telemetry"
)

// A regional instance is ready only while both databases it serves from
// answer: its cluster's and the directory (plans, webhooks, event schemas,
// stacking rules). Liveness reads neither, so an outage of a database
// takes the pod out of the load balancer without restarting it.
func TestReadinessCoversBothDatabasesAndLivenessNeither(t *testing.T) {
	t.Parallel()
	for _, down := range []string{"tenancy", "api"} {
		t.Run(down+" down", func(t *testing.T) {
			t.Parallel()
			e := stacktest.Start(t, stacktest.Options{PrivateClusters: []string{down}})
			app := e.Stack.Regional["api"]
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			admin := serveAdmin(t, ctx, app.Ready)
			get := func(url string) (int, string) {
				t.Helper()
				r := stacktest.Do(t, http.DefaultClient, "GET", url, nil, nil)
				return r.Status, string(r.Body)
			}
			for _, u := range []string{admin + "/readyz", admin + "/healthz", e.Stack.RegionalURL("api") + "/readyz", e.Stack.RegionalURL("api") + "/healthz"} {
				if s, body := get(u); s != 200 {
					t.Fatalf("%s with both databases up: %d %s", u, s, body)
				}
			}
			e.Servers[down].Stop()
			want := "the directory (tenancy database)"
			if down == "api" {
				want = "the cluster's database"
			}
			if s, body := get(admin + "/readyz"); s != 503 || !strings.Contains(body, want) {
				t.Errorf("admin /readyz with %s down: %d %s, want 503 naming %q", down, s, body, want)
			}
			if s, body := get(e.Stack.RegionalURL("api") + "/readyz"); s != 503 {
				t.Errorf("/readyz with %s down: %d %s, want 503", down, s, body)
			}
			for _, u := range []string{admin + "/healthz", e.Stack.RegionalURL("api") + "/healthz"} {
				if s, body := get(u); s != 200 {
					t.Errorf("%s (liveness) with %s down: %d %s, want 200", u, down, s, body)
				}
			}
		})
	}
}

// serveAdmin serves the admin endpoints (/readyz, /healthz) as `tally
// regional` does, on a free port, and returns their base URL.
func serveAdmin(t *testing.T, ctx context.Context, ready func(context.Context) error) string {
	t.Helper()
	l := listen(t)
	addr := l.Addr().String()
	l.Close()
	go telemetry.ServeAdmin(ctx, addr, telemetry.NewMetrics("regional", "api"), ready, telemetry.NewLogger(io.Discard, 0))
	base := "http://" + addr
	waitUp(t, base+"/healthz")
	return base
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func waitUp(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := http.Get(url)
		if err == nil {
			r.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", url, err)
		}
	}
}
