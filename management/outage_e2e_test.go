package management_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/tenancy"
)

// With the directory (the tenancy database) down, management answers 503
// saying so, not "the database of this cluster", with Retry-After: the
// request may succeed once the directory is back; and it is not ready.
func TestManagementSaysTheDirectoryIsDownWithRetryAfter(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{PrivateClusters: []string{"tenancy"}})
	h := e.MgmtHeader()
	// The directory poll evicts what changed in its last WatchLookback
	// again and again, the new management key included: after that the
	// key the next request caches stays cached through the outage.
	time.Sleep(tenancy.WatchLookback + 500*time.Millisecond)
	// The router now holds the management key: what answers during the
	// outage is management itself.
	if r := e.Do(t, "GET", base+"/projects", h, nil); r.Status != 200 {
		t.Fatalf("before the outage: %d %s", r.Status, r.Body)
	}
	if err := e.Stack.Management.Ready(context.Background()); err != nil {
		t.Fatalf("readiness before the outage: %v", err)
	}
	e.Servers["tenancy"].Stop()
	// Its readiness says so too: management serves from the directory alone.
	if err := e.Stack.Management.Ready(context.Background()); err == nil {
		t.Error("management reports itself ready with the directory down")
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/projects", nil},
		{"GET", "/projects/proj_x", nil},
		{"GET", "/clusters", nil},
		{"POST", "/projects", map[string]any{"name": "Shop", "cluster_id": "api"}},
		{"PUT", "/plans/p1", map[string]any{"features": []string{}}},
	} {
		r := e.Do(t, c.method, base+c.path, h, c.body)
		m := r.JSON(t)
		details, _ := m["details"].(string)
		if r.Status != 503 || m["key"] != "service_unavailable" || !strings.Contains(details, "directory (the tenancy database)") ||
			strings.Contains(details, "of this cluster") || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s during the outage: %d Retry-After %q %s", c.method, c.path, r.Status, r.Header.Get("Retry-After"), r.Body)
		}
	}
}
