package management_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/tenancy"
)

func TestCustomEventSchemas(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	h := e.MgmtHeader()
	a, b := e.CreateProject(t, "us1"), e.CreateProject(t, "as1")
	schemas := func(p stacktest.Project) string { return base + "/projects/" + p.ID + "/custom-event-schemas" }
	props := func(m map[string]any) map[string]any {
		return m["schema"].(map[string]any)["properties"].(map[string]any)
	}
	same := func(got, want any) bool {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		var gv, wv any
		_ = json.Unmarshal(g, &gv)
		_ = json.Unmarshal(w, &wv)
		return reflect.DeepEqual(gv, wv)
	}

	// Create: 200 with the reference's object.
	r := e.Do(t, "POST", schemas(a), h, map[string]any{"name": "review", "schema": map[string]any{"properties": map[string]any{
		"stars":     map[string]any{"type": "number", "optional": false},
		"published": map[string]any{"type": "boolean", "optional": true},
	}}})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	s := r.JSON(t)
	id, _ := s["id"].(string)
	if !strings.HasPrefix(id, "ms_") || s["object"] != "custom-event-schema" || s["name"] != "review" || s["created_at"] == nil ||
		s["updated_at"] != nil || !same(props(s), map[string]any{"stars": map[string]any{"type": "number", "optional": false},
		"published": map[string]any{"type": "boolean", "optional": true}}) {
		t.Fatalf("created: %s", r.Body)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z", s["created_at"].(string)); err != nil {
		t.Fatalf("created_at: %v", err)
	}
	// Properties may be {}.
	r = e.Do(t, "POST", schemas(a), h, map[string]any{"name": "signup", "schema": map[string]any{"properties": map[string]any{}}})
	if r.Status != 200 || len(props(r.JSON(t))) != 0 {
		t.Fatalf("create with no properties: %d %s", r.Status, r.Body)
	}
	emptyID := r.JSON(t)["id"].(string)

	// List and get.
	r = e.Do(t, "GET", schemas(a), h, nil)
	if m := r.JSON(t); r.Status != 200 || m["object"] != "list" || m["data_ref"] != "data" || m["total"] != float64(2) ||
		len(m["data"].([]any)) != 2 || m["data"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", schemas(a)+"/"+id, h, nil); r.Status != 200 || !same(r.JSON(t), s) {
		t.Fatalf("get: %d %s\nwant %v", r.Status, r.Body, s)
	}

	// Update merges: sent properties added or replaced (a type may change),
	// omitted ones unchanged, deleted ones soft-removed and still listed.
	r = e.Do(t, "PUT", schemas(a)+"/"+id, h, map[string]any{"schema": map[string]any{"properties": map[string]any{
		"stars":    map[string]any{"type": "string", "optional": true},
		"verified": map[string]any{"type": "date", "optional": false},
	}}})
	want := map[string]any{"stars": map[string]any{"type": "string", "optional": true},
		"published": map[string]any{"type": "boolean", "optional": true},
		"verified":  map[string]any{"type": "date", "optional": false}}
	if m := r.JSON(t); r.Status != 200 || !same(props(m), want) || m["updated_at"] == nil || m["name"] != "review" ||
		m["created_at"] != s["created_at"] {
		t.Fatalf("merge: %d %s", r.Status, r.Body)
	}
	r = e.Do(t, "PUT", schemas(a)+"/"+id, h, map[string]any{"name": "review", "schema": map[string]any{"properties": map[string]any{
		"published": map[string]any{"type": "boolean", "optional": true, "deleted": true},
		"at":        map[string]any{"type": "datetime", "optional": true},
	}}})
	want["published"] = map[string]any{"type": "boolean", "optional": true, "deleted": true}
	want["at"] = map[string]any{"type": "datetime", "optional": true}
	if r.Status != 200 || !same(props(r.JSON(t)), want) {
		t.Fatalf("soft delete: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", schemas(a)+"/"+id, h, nil); r.Status != 200 || !same(props(r.JSON(t)), want) {
		t.Fatalf("get after soft delete: %d %s", r.Status, r.Body)
	}

	// Bad input: 400 naming what is wrong.
	long := strings.Repeat("p", 101)
	for name, c := range map[string]struct {
		method, url string
		body        any
		says        string
	}{
		"no name":             {"POST", schemas(a), map[string]any{"schema": map[string]any{"properties": map[string]any{}}}, "name"},
		"empty name":          {"POST", schemas(a), map[string]any{"name": "", "schema": map[string]any{"properties": map[string]any{}}}, "name"},
		"long name":           {"POST", schemas(a), map[string]any{"name": strings.Repeat("e", 301), "schema": map[string]any{"properties": map[string]any{}}}, "301"},
		"no schema":           {"POST", schemas(a), map[string]any{"name": "x"}, "schema"},
		"no properties":       {"POST", schemas(a), map[string]any{"name": "x", "schema": map[string]any{}}, "schema.properties"},
		"properties array":    {"POST", schemas(a), map[string]any{"name": "x", "schema": map[string]any{"properties": []any{"a"}}}, "schema.properties"},
		"property not object": {"POST", schemas(a), map[string]any{"name": "x", "schema": map[string]any{"properties": map[string]any{"color": "red"}}}, `"color"`},
		"unknown type":        {"POST", schemas(a), map[string]any{"name": "x", "schema": map[string]any{"properties": map[string]any{"color": map[string]any{"type": "colour", "optional": true}}}}, `"color"`},
		"no type":             {"POST", schemas(a), map[string]any{"name": "x", "schema": map[string]any{"properties": map[string]any{"color": map[string]any{"optional": true}}}}, `"color"`},
		"optional not bool":   {"POST", schemas(a), map[string]any{"name": "x", "schema": map[string]any{"properties": map[string]any{"color": map[string]any{"type": "string", "optional": "yes"}}}}, `"color"].optional`},
		"empty property":      {"POST", schemas(a), map[string]any{"name": "x", "schema": map[string]any{"properties": map[string]any{"": map[string]any{"type": "string", "optional": true}}}}, "empty"},
		"long property":       {"POST", schemas(a), map[string]any{"name": "x", "schema": map[string]any{"properties": map[string]any{long: map[string]any{"type": "string", "optional": true}}}}, long},
		"reserved name":       {"POST", schemas(a), map[string]any{"name": "order.paid", "schema": map[string]any{"properties": map[string]any{}}}, "order.paid"},
		"malformed":           {"POST", schemas(a), `{"name":`, "Malformed"},
		"rename":              {"PUT", schemas(a) + "/" + id, map[string]any{"name": "rating"}, "name"},
		"update unknown type": {"PUT", schemas(a) + "/" + id, map[string]any{"schema": map[string]any{"properties": map[string]any{"stars": map[string]any{"type": "int"}}}}, `"stars"`},
		"update non-object":   {"PUT", schemas(a) + "/" + id, map[string]any{"schema": map[string]any{"properties": "stars"}}, "schema.properties"},
	} {
		r := e.Do(t, c.method, c.url, h, c.body)
		if m := r.JSON(t); r.Status != 400 || m["key"] != "invalid_payload" || !strings.Contains(m["details"].(string), c.says) {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	// Nothing of the refused updates was kept.
	if r := e.Do(t, "GET", schemas(a)+"/"+id, h, nil); !same(props(r.JSON(t)), want) || r.JSON(t)["name"] != "review" {
		t.Fatalf("after refused updates: %s", r.Body)
	}

	// A name is taken once per project: 409 duplicate_found; another project may use it.
	r = e.Do(t, "POST", schemas(a), h, map[string]any{"name": "review", "schema": map[string]any{"properties": map[string]any{}}})
	if m := r.JSON(t); r.Status != 409 || m["key"] != "duplicate_found" || !strings.Contains(m["details"].(string), "review") {
		t.Fatalf("duplicate: %d %s", r.Status, r.Body)
	}
	r = e.Do(t, "POST", schemas(b), h, map[string]any{"name": "review", "schema": map[string]any{"properties": map[string]any{}}})
	if r.Status != 200 {
		t.Fatalf("same name in another project: %d %s", r.Status, r.Body)
	}
	if m := e.Do(t, "GET", schemas(b), h, nil).JSON(t); m["total"] != float64(1) {
		t.Fatalf("b lists only its own: %v", m)
	}

	// Another project's schema: 404.
	for _, method := range []string{"GET", "PUT", "DELETE"} {
		r := e.Do(t, method, schemas(b)+"/"+id, h, map[string]any{"schema": map[string]any{"properties": map[string]any{}}})
		if m := r.JSON(t); r.Status != 404 || m["key"] != "not_found" || m["resource_type"] != "custom_event_schema" || m["resource_id"] != id {
			t.Fatalf("%s another project's schema: %d %s", method, r.Status, r.Body)
		}
	}
	if r := e.Do(t, "GET", base+"/projects/proj_nope/custom-event-schemas", h, nil); r.Status != 404 || r.JSON(t)["resource_type"] != "project" {
		t.Fatalf("unknown project: %d %s", r.Status, r.Body)
	}
	// Without management credentials: 401; with a project's application keys: 401.
	for _, hdr := range []map[string][]string{nil, a.Header()} {
		for _, method := range []string{"GET", "POST"} {
			if r := e.Do(t, method, schemas(a), hdr, map[string]any{"name": "x", "schema": map[string]any{"properties": map[string]any{}}}); r.Status != 401 || r.JSON(t)["key"] != "unauthorized" {
				t.Fatalf("%s without management keys: %d %s", method, r.Status, r.Body)
			}
		}
	}

	// Delete: 204 with no content, then 404; permanent, and the name is free again.
	if r := e.Do(t, "DELETE", schemas(a)+"/"+id, h, nil); r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	for _, method := range []string{"GET", "DELETE", "PUT"} {
		if r := e.Do(t, method, schemas(a)+"/"+id, h, map[string]any{}); r.Status != 404 || r.JSON(t)["resource_type"] != "custom_event_schema" {
			t.Fatalf("%s after delete: %d %s", method, r.Status, r.Body)
		}
	}
	if m := e.Do(t, "GET", schemas(a), h, nil).JSON(t); m["total"] != float64(1) || m["data"].([]any)[0].(map[string]any)["id"] != emptyID {
		t.Fatalf("list after delete: %v", m)
	}
	if r := e.Do(t, "POST", schemas(a), h, map[string]any{"name": "review", "schema": map[string]any{"properties": map[string]any{}}}); r.Status != 200 {
		t.Fatalf("name reused after delete: %d %s", r.Status, r.Body)
	}
}

// A schema change is in force on a regional instance within 2 s: the
// regional App does not expose its resolver, so the test reads through a
// resolver of its own over the same tenancy database, polling at the
// production default (500 ms), as every regional instance does.
func TestCustomEventSchemaChangesReachResolvers(t *testing.T) {
	// Not in parallel: it holds the resolver to two seconds.
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	h := e.MgmtHeader()
	p := e.CreateProject(t, "api")
	url := base + "/projects/" + p.ID + "/custom-event-schemas"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := tenancy.NewResolver(e.Stack.Tenancy, tenancy.ResolverOptions{})
	go res.Watch(ctx, 500*time.Millisecond)
	// Each step starts from a cached answer, so only the change log can
	// bring the change.
	within := func(what string, cond func([]tenancy.EventSchema) bool) {
		t.Helper()
		start := time.Now()
		for {
			got, err := res.EventSchemas(ctx, p.ID)
			if err == nil && cond(got) {
				return
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("%s: not seen within 2 s: %+v %v", what, got, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if got, err := res.EventSchemas(ctx, p.ID); err != nil || len(got) != 0 {
		t.Fatalf("before: %v %v", got, err)
	}

	r := e.Do(t, "POST", url, h, map[string]any{"name": "purchase", "schema": map[string]any{"properties": map[string]any{
		"amount": map[string]any{"type": "number", "optional": false}}}})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["id"].(string)
	within("create", func(s []tenancy.EventSchema) bool {
		return len(s) == 1 && s[0].ID == id && s[0].Name == "purchase" && s[0].ProjectID == p.ID &&
			s[0].Properties["amount"] == tenancy.EventProperty{Type: tenancy.PropNumber} && s[0].UpdatedAt == nil
	})

	r = e.Do(t, "PUT", url+"/"+id, h, map[string]any{"schema": map[string]any{"properties": map[string]any{
		"amount": map[string]any{"type": "number", "optional": true, "deleted": true},
		"store":  map[string]any{"type": "string", "optional": false}}}})
	if r.Status != 200 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	within("update", func(s []tenancy.EventSchema) bool {
		return len(s) == 1 && s[0].UpdatedAt != nil &&
			s[0].Properties["amount"] == tenancy.EventProperty{Type: tenancy.PropNumber, Optional: true, Deleted: true} &&
			s[0].Properties["store"] == tenancy.EventProperty{Type: tenancy.PropString}
	})

	if r := e.Do(t, "DELETE", url+"/"+id, h, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	within("delete", func(s []tenancy.EventSchema) bool { return len(s) == 0 })
}
