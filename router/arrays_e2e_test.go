package router_test

import (
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/conformance"
)

// arrayRoutes are the reference's operations whose body is a JSON array,
// read from its OpenAPI description, so a route added there is walked too.
func arrayRoutes(t *testing.T) []string {
	t.Helper()
	path := conformance.ReferencePath()
	if path == "" {
		t.Skip("no reference description (see conformance.ReferencePath)")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no reference description: %v", err)
	}
	var ref struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	type schema struct {
		Ref  string `json:"$ref"`
		Type string `json:"type"`
	}
	var out []string
	for path, ops := range ref.Paths {
		for method, op := range ops {
			var o struct {
				RequestBody struct {
					Content map[string]struct {
						Schema schema `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			}
			if json.Unmarshal(op, &o) != nil {
				continue
			}
			s, ok := o.RequestBody.Content["application/json"]
			if !ok {
				continue
			}
			sc := s.Schema
			for sc.Ref != "" {
				var next schema
				_ = json.Unmarshal(ref.Components.Schemas[sc.Ref[strings.LastIndex(sc.Ref, "/")+1:]], &next)
				sc = next
			}
			if sc.Type == "array" {
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestArrayBodiesSayWhatTheyTake sends an object to every route whose body
// is an array and wants a 400 that says so: "Expected a JSON array, got an
// object.", where each answered "Expected a JSON object, got object.".
func TestArrayBodiesSayWhatTheyTake(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	ids := seedObjects(t, a)
	discount := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Arrays", "campaign_type": "DISCOUNT_COUPONS",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 10}}})["id"].(string)
	served := map[string]bool{}
	for _, r := range e.Stack.Regional["api"].Handler().(*echo.Echo).Routes() {
		served[r.Method+" "+r.Path] = true
	}
	routes := arrayRoutes(t)
	if len(routes) < 10 {
		t.Fatalf("only %d routes take an array: %v", len(routes), routes)
	}
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		// {campaignId} in the reference is :campaignId in the router.
		route := strings.NewReplacer("{", ":", "}", "").Replace(path)
		if !served[method+" "+route] {
			t.Errorf("%s is not served", r)
			continue
		}
		target := fillPath(route, ids)
		if route == "/v1/campaigns/:campaignId/import" { // a discount campaign's vouchers
			target = "/v1/campaigns/" + discount + "/import"
		}
		for body, got := range map[string]string{`{"a":1}`: "an object", `"x"`: "a string", `7`: "a number", `true`: "a boolean"} {
			status, _, raw, _ := fuzzDo(t, e, method, stacktest.URL("api", target), a.P.Header(), []byte(body))
			var er struct{ Key, Details string }
			_ = json.Unmarshal(raw, &er)
			// The loyalty campaign's rewards also take one assignment
			// object, Tally's shorthand for a list of one.
			if body[0] == '{' && r == "POST /v1/loyalties/{campaignId}/rewards" {
				continue
			}
			// The bulk and import routes say what items they take:
			// "Expected a JSON array of product objects, …, got an object."
			if status != 400 || er.Key != "invalid_payload" || !strings.HasPrefix(er.Details, "Expected a JSON array") ||
				!strings.HasSuffix(er.Details, ", got "+got+".") {
				t.Errorf("%s with %s: %d %s, want 400 invalid_payload saying it expected a JSON array and got %s", r, body, status, raw, got)
			}
		}
	}
}
