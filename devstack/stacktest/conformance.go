package stacktest

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tallyhq/tally/internal/conformance"
)

// Conformance: every answer the end-to-end tests receive from the public API
// is checked against the reference's OpenAPI description
// (internal/conformance) when the test's environment closes.

type recorder struct {
	mu  sync.Mutex
	got []conformance.Exchange
}

func (r *recorder) add(method, rawURL string, status int, contentType string, body []byte) {
	u, err := url.Parse(rawURL)
	if err != nil || !(strings.HasPrefix(u.Path, "/v1/") || strings.HasPrefix(u.Path, "/client/v1/")) ||
		!strings.HasPrefix(contentType, "application/json") {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, conformance.Exchange{Method: method, Path: u.Path, Status: status, Body: body})
}

// checkConformance validates every recorded answer; it reports each
// operation and field once.
func checkConformance(t testing.TB, rec *recorder) {
	if conformance.Skipped() {
		return
	}
	rec.mu.Lock()
	got := rec.got
	rec.mu.Unlock()
	res, err := conformance.Check(got)
	if err != nil {
		t.Errorf("conformance: %v", err)
		return
	}
	if res.Absent {
		t.Log("conformance: skipped, the reference description (../shared/reference/voucherify-openapi.json or TALLY_OPENAPI) is absent")
		return
	}
	seen := map[string]bool{}
	for _, msg := range res.Errors {
		if !seen[msg] {
			seen[msg] = true
			t.Errorf("conformance: %s", msg)
		}
	}
}

// recordingDo is Do that also records the answer for the conformance check.
func (e *Env) recordingDo(t testing.TB, method, rawURL string, header http.Header, body any) Resp {
	t.Helper()
	r := Do(t, e.Client, method, rawURL, header, body)
	if e.rec != nil {
		e.rec.add(method, rawURL, r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	return r
}

// ConformsTo fails t when v, a value as JSON decodes it, breaks the
// reference's schema name (of its components): for what no operation
// answers, as a webhook's data, which the reference defines only as the
// schemas of its events.
func ConformsTo(t testing.TB, name string, v any) {
	t.Helper()
	if conformance.Skipped() {
		return
	}
	res, err := conformance.Schema(name, v)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	if res.Absent {
		t.Log("conformance: skipped, the reference description is absent")
		return
	}
	for _, msg := range res.Errors {
		t.Errorf("conformance: %s", msg)
	}
}
