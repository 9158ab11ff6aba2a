package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func TestCustomersThroughTheRouter(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	url := func(path string) string { return stacktest.URL("api", path) }
	h := p.Header()

	t.Run("create then update by source_id", func(t *testing.T) {
		r := e.Do(t, "POST", url("/v1/customers"), h, map[string]any{
			"source_id": "s-1", "name": "Ann", "email": "ann@example.com", "birthdate": "1990-02-03",
			"address": map[string]any{"city": "Oslo"}, "metadata": map[string]any{"tier": "gold"}, "unknown_field": 1})
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		first := r.JSON(t)
		if first["object"] != "customer" || !strings.HasPrefix(first["id"].(string), "cust_") || first["updated_at"] != nil {
			t.Fatalf("created: %s", r.Body)
		}
		for _, k := range []string{"summary", "loyalty", "referrals", "assets", "phone", "description"} {
			if _, ok := first[k]; !ok {
				t.Fatalf("field %s missing: %s", k, r.Body)
			}
		}
		r = e.Do(t, "POST", url("/v1/customers"), h, map[string]any{"source_id": "s-1", "phone": "+47 1"})
		second := r.JSON(t)
		if r.Status != 200 || second["id"] != first["id"] || second["name"] != "Ann" || second["phone"] != "+47 1" ||
			second["updated_at"] == nil || second["created_at"] != first["created_at"] {
			t.Fatalf("upsert did not update the same customer: %s", r.Body)
		}
		for _, ref := range []string{first["id"].(string), "s-1"} {
			r := e.Do(t, "GET", url("/v1/customers/"+ref), h, nil)
			if r.Status != 200 || r.JSON(t)["email"] != "ann@example.com" {
				t.Fatalf("get %s: %d %s", ref, r.Status, r.Body)
			}
		}
	})

	t.Run("put changes named fields and clears nulls", func(t *testing.T) {
		r := e.Do(t, "PUT", url("/v1/customers/s-1"), h, map[string]any{"email": nil, "name": "Ann B"})
		m := r.JSON(t)
		if r.Status != 200 || m["email"] != nil || m["name"] != "Ann B" || m["phone"] != "+47 1" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})

	t.Run("delete then 404", func(t *testing.T) {
		r := e.Do(t, "POST", url("/v1/customers"), h, map[string]any{"name": "temp"})
		id := r.JSON(t)["id"].(string)
		if r := e.Do(t, "DELETE", url("/v1/customers/"+id), h, nil); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		r = e.Do(t, "DELETE", url("/v1/customers/"+id), h, nil)
		m := r.JSON(t)
		if r.Status != 404 || m["resource_id"] != id || m["resource_type"] != "customer" || m["message"] != "Resource not found" {
			t.Fatalf("second delete: %d %s", r.Status, r.Body)
		}
	})

	t.Run("source_id taken by another customer is 409", func(t *testing.T) {
		r := e.Do(t, "POST", url("/v1/customers"), h, map[string]any{"source_id": "s-2"})
		if r.Status != 200 {
			t.Fatal(string(r.Body))
		}
		r = e.Do(t, "PUT", url("/v1/customers/s-2"), h, map[string]any{"source_id": "s-1"})
		if r.Status != 409 || r.JSON(t)["key"] != "duplicate_found" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
}

func TestCustomerListPagesWithTheCursor(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	p := e.CreateProject(t, "as1")
	url := func(path string) string { return stacktest.URL("as1", path) }
	const n = 25
	for i := 0; i < n; i++ {
		r := e.Do(t, "POST", url("/v1/customers"), p.Header(), map[string]any{"source_id": fmt.Sprintf("c%02d", i),
			"email": fmt.Sprintf("%d@x.io", i%2)})
		if r.Status != 200 {
			t.Fatal(string(r.Body))
		}
	}
	for _, order := range []string{"created_at", "-created_at", "source_id", "-source_id", "updated_at"} {
		t.Run(order, func(t *testing.T) {
			var seen []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 10 {
					t.Fatal("too many pages")
				}
				r := e.Do(t, "GET", url("/v1/customers?limit=7&order="+order+"&starting_after_id="+cursor), p.Header(), nil)
				if r.Status != 200 {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				m := r.JSON(t)
				if m["total"] != float64(n) || m["data_ref"] != "customers" || m["object"] != "list" {
					t.Fatalf("envelope: %s", r.Body)
				}
				for _, c := range m["customers"].([]any) {
					seen = append(seen, c.(map[string]any)["source_id"].(string))
				}
				if m["has_more"] != true {
					break
				}
				cursor = m["more_starting_after"].(string)
			}
			if len(seen) != n {
				t.Fatalf("saw %d customers, want %d: %v", len(seen), n, seen)
			}
			for i := 1; i < n; i++ {
				asc := seen[i-1] < seen[i]
				if strings.HasPrefix(order, "-") == asc {
					t.Fatalf("order %s broken at %d: %v", order, i, seen)
				}
			}
		})
	}
	r := e.Do(t, "GET", url("/v1/customers?email=1@x.io&limit=100"), p.Header(), nil)
	if m := r.JSON(t); m["total"] != float64(12) || len(m["customers"].([]any)) != 12 {
		t.Fatalf("email filter: %s", r.Body)
	}
	for _, bad := range []string{"limit=0", "limit=101", "limit=x", "order=name", "page=100", "created_at[after]=yesterday"} {
		r := e.Do(t, "GET", url("/v1/customers?"+bad), p.Header(), nil)
		m := r.JSON(t)
		param := strings.SplitN(bad, "=", 2)[0]
		key := "invalid_query_params"
		if param == "page" {
			key = "page_over_limit"
		}
		if r.Status != 400 || m["key"] != key || !strings.Contains(m["details"].(string), param) {
			t.Fatalf("%s: %d %s", bad, r.Status, r.Body)
		}
	}
}

func TestBadRequestsGetClearJSONErrors(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	url := stacktest.URL("api", "/v1/customers")
	withType := func(ct string) http.Header {
		h := p.Header()
		h.Set("Content-Type", ct)
		return h
	}
	cases := []struct {
		name, method, url string
		header            http.Header
		body              any
		status            int
		key, detail       string
	}{
		{"malformed JSON", "POST", url, p.Header(), `{"name": `, 400, "invalid_payload", "Malformed JSON"},
		{"wrong type", "POST", url, p.Header(), `{"name": 5}`, 400, "invalid_payload", "name"},
		{"not an object", "POST", url, p.Header(), `[1,2]`, 400, "invalid_payload", ""},
		{"bad date", "POST", url, p.Header(), `{"birthdate": "02/03/1990"}`, 400, "invalid_payload", "birthdate"},
		{"empty body", "POST", url, p.Header(), "", 400, "invalid_payload", "empty"},
		{"form body", "POST", url, withType("application/x-www-form-urlencoded"), "name=x", 415, "unsupported_media_type", "application/json"},
		{"method", "PATCH", url, p.Header(), nil, 405, "method_not_allowed", "GET"},
		{"no route", "GET", stacktest.URL("api", "/v1/nothing-here"), p.Header(), nil, 404, "not_found", ""},
		{"too large", "POST", url, p.Header(), `{"name": "` + strings.Repeat("x", 2<<20) + `"}`, 413, "payload_too_large", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.Do(t, c.method, c.url, c.header, c.body)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			m := r.JSON(t)
			if m["key"] != c.key || m["code"] != float64(c.status) || !strings.HasPrefix(m["request_id"].(string), "v-") {
				t.Fatalf("body %s", r.Body)
			}
			if d, _ := m["details"].(string); !strings.Contains(d, c.detail) {
				t.Fatalf("details %q do not mention %q", d, c.detail)
			}
			if r.Header.Get("X-Request-Id") != m["request_id"] {
				t.Fatalf("X-Request-Id %q differs from body's %v", r.Header.Get("X-Request-Id"), m["request_id"])
			}
		})
	}
}

func TestAsyncActionsEndpointsAnswerThroughTheRouter(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	r := e.Do(t, "GET", stacktest.URL("api", "/v1/async-actions"), p.Header(), nil)
	if m := r.JSON(t); r.Status != 200 || m["data_ref"] != "async_actions" || len(m["async_actions"].([]any)) != 0 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	r = e.Do(t, "GET", stacktest.URL("api", "/v1/async-actions/aa_nope"), p.Header(), nil)
	if m := r.JSON(t); r.Status != 404 || m["resource_type"] != "async_action" {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	// Internal endpoints refuse application identities.
	r = e.Do(t, "GET", stacktest.URL("api", "/internal/v1/outbox/parked"), p.Header(), nil)
	if r.Status != 401 {
		t.Fatalf("internal with app keys: %d %s", r.Status, r.Body)
	}
}

// A customer named again as it is (POST /v1/customers with its source_id,
// an order's or a redemption's customer) is not written: updated_at stays
// and no customer.updated is raised; a change is written as before.
func TestAnUnchangedCustomerIsNotWrittenAgain(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.updated")
	body := map[string]any{"source_id": "same", "name": "Ann", "metadata": map[string]any{"tier": "gold"}}
	first := a.OK("POST", "/v1/customers", body)
	again := a.OK("POST", "/v1/customers", body)
	a.OK("POST", "/v1/orders", map[string]any{"amount": 1000, "customer": map[string]any{"source_id": "same"}})
	if again["id"] != first["id"] || again["updated_at"] != first["updated_at"] {
		t.Fatalf("named again: %v, then %v", first, again)
	}
	if g := a.OK("GET", "/v1/customers/same", nil); g["updated_at"] != first["updated_at"] || g["metadata"].(map[string]any)["tier"] != "gold" {
		t.Fatalf("read back: %v", g)
	}
	changed := a.OK("POST", "/v1/customers", map[string]any{"source_id": "same", "metadata": map[string]any{"tier": "silver"}})
	if changed["updated_at"] == nil || changed["updated_at"] == first["updated_at"] || changed["metadata"].(map[string]any)["tier"] != "silver" ||
		changed["name"] != "Ann" {
		t.Fatalf("changed: %v", changed)
	}
	hooks.Wait(t, "customer.updated", 1)
	time.Sleep(300 * time.Millisecond)
	if n := hooks.Count("customer.updated"); n != 1 {
		t.Fatalf("customer.updated %d times, want 1", n)
	}
}
