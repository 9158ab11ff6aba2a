package codesize

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheStackLinksNoRingImplementation keeps the ring's implementation
// (internal/peerlimit: gubernator and Kubernetes' client, some 350
// packages) and the OTLP exporter (internal/telemetry/tracing: some 120)
// out of the router, the development stack and the test stack: every end-to-end test binary links those, and the race pass of
// `make test` links each anew, twice as long with it (internal/peerlimit/ring).
func TestTheStackLinksNoRingImplementation(t *testing.T) {
	pkgs := []string{"github.com/tallyhq/tally/router", "github.com/tallyhq/tally/devstack",
		"github.com/tallyhq/tally/devstack/stacktest", "github.com/tallyhq/tally/regional"}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/tallyhq/tally/internal/peerlimit" || strings.HasPrefix(p, "github.com/gubernator-io/") ||
			strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "go.opentelemetry.io/otel/exporters/") {
			t.Errorf("%s is linked into the router, the development stack or the test stack: hand it in as an interface "+
				"(internal/peerlimit/ring) or set it up in cmd/tally (internal/telemetry/tracing)", p)
		}
	}
}
