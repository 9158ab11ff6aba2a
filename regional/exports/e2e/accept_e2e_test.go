package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// An export's file is served as text/csv or, when Accept prefers it,
// text/plain (the reference's type, which the Python SDK asks for and
// which was refused it), from its link on the download host and from the
// API host; an Accept that takes neither is a 406 in JSON naming both.
func TestAnExportsFileFollowsAccept(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann"})
	e := export(a, "/v1/exports", map[string]any{"exported_object": "customer", "parameters": map[string]any{"fields": []string{"source_id"}}})
	link := e["result"].(map[string]any)["url"].(string)
	csv := get(a, link, nil)
	for _, c := range []struct {
		url, accept, want string
	}{
		{link, "", "text/csv"},
		{link, "*/*", "text/csv"},
		{link, "text/plain", "text/plain"},
		{link, "text/csv;q=0.5, text/plain", "text/plain"},
		{link, "application/json, text/csv;q=0.1", "text/csv"},
		{stacktest.URL("api", "/v1/exports/"+e["id"].(string)), "text/plain", "text/plain"},
	} {
		h := a.P.Header()
		if strings.Contains(c.url, "token=") {
			h = http.Header{}
		}
		if c.accept != "" {
			h.Set("Accept", c.accept)
		}
		r := get(a, c.url, h)
		if r.Status != 200 || r.Header.Get("Content-Type") != c.want+"; charset=utf-8" || string(r.Body) != string(csv.Body) ||
			!strings.Contains(r.Header.Get("Vary"), "Accept") {
			t.Errorf("Accept %q on %s: %d %v %s", c.accept, c.url, r.Status, r.Header, r.Body)
		}
	}
	for _, accept := range []string{"application/json", "text/html", "text/csv;q=0, text/plain;q=0"} {
		r := get(a, link, http.Header{"Accept": {accept}})
		var body map[string]any
		if r.Status != 406 || json.Unmarshal(r.Body, &body) != nil || body["key"] != "not_acceptable" ||
			!strings.Contains(body["details"].(string), "text/plain") {
			t.Errorf("Accept %q: %d %s", accept, r.Status, r.Body)
		}
	}
}
