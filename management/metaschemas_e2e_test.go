package management_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// The management API's metadata schemas: one per resource, snake_case
// definitions, PUT replacing each sent definition whole and keeping the
// others, a type that never changes, deleted definitions still listed.
func TestMetadataSchemas(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	h := e.MgmtHeader()
	a, b := e.CreateProject(t, "us1"), e.CreateProject(t, "as1")
	schemas := func(p stacktest.Project) string { return base + "/projects/" + p.ID + "/metadata-schemas" }
	props := func(m map[string]any) map[string]any { return m["properties"].(map[string]any) }

	r := e.Do(t, "POST", schemas(a), h, map[string]any{"related_object": "customer", "properties": map[string]any{
		"location_id": map[string]any{"type": "string", "array": true, "optional": false, "eq": []any{"L1", "L2"}},
		"age":         map[string]any{"type": "number", "gte": 18, "lt": 130},
		"code":        map[string]any{"type": "string", "exact_length": 4},
		"address":     map[string]any{"type": "object", "object_type": "street_address"},
	}})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	s := r.JSON(t)
	id, _ := s["id"].(string)
	loc, _ := props(s)["location_id"].(map[string]any)
	if !strings.HasPrefix(id, "ms_") || s["object"] != "metadata_schema" || s["related_object"] != "customer" ||
		s["allow_defined_only"] != false || s["updated_at"] != nil || loc["array"] != true || loc["optional"] != false ||
		props(s)["code"].(map[string]any)["exact_length"] != float64(4) ||
		props(s)["address"].(map[string]any)["object_type"] != "street_address" ||
		props(s)["age"].(map[string]any)["optional"] != true {
		t.Fatalf("created: %s", r.Body)
	}

	// One schema a resource.
	if r := e.Do(t, "POST", schemas(a), h, map[string]any{"related_object": "customer", "properties": map[string]any{}}); r.Status != 409 {
		t.Fatalf("a second customer schema: %d %s", r.Status, r.Body)
	}
	// Another project may have its own.
	if r := e.Do(t, "POST", schemas(b), h, map[string]any{"related_object": "customer", "properties": map[string]any{}}); r.Status != 200 {
		t.Fatalf("another project's customer schema: %d %s", r.Status, r.Body)
	}

	// What is refused, each naming what is wrong.
	for _, c := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"no related_object", map[string]any{"properties": map[string]any{}}, "related_object is required"},
		{"no properties", map[string]any{"related_object": "order"}, "properties is required"},
		{"bad resource", map[string]any{"related_object": "Order!", "properties": map[string]any{}}, "related_object must be"},
		{"bad type", map[string]any{"related_object": "order", "properties": map[string]any{"x": map[string]any{"type": "uuid"}}},
			`properties["x"].type is required, one of`},
		{"length on a number", map[string]any{"related_object": "order", "properties": map[string]any{
			"x": map[string]any{"type": "number", "max_length": 3}}}, `properties["x"]: min_length, max_length`},
		{"bound on a string", map[string]any{"related_object": "order", "properties": map[string]any{
			"x": map[string]any{"type": "string", "gt": 3}}}, `properties["x"]: lt, lte, gt and gte`},
		{"object_type on a string", map[string]any{"related_object": "order", "properties": map[string]any{
			"x": map[string]any{"type": "string", "object_type": "a"}}}, `properties["x"].object_type is for the object type`},
		{"nesting twice", map[string]any{"related_object": "street_address", "properties": map[string]any{
			"x": map[string]any{"type": "object", "object_type": "b"}}}, "one level of nesting"},
		{"too many", map[string]any{"related_object": "order", "properties": manyDefinitions(101)}, "at most 100 definitions"},
	} {
		r := e.Do(t, "POST", schemas(a), h, c.body)
		if m := r.JSON(t); r.Status != 400 || m["key"] != "invalid_payload" || !strings.Contains(m["details"].(string), c.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", c.name, r.Status, r.Body, c.want)
		}
	}

	// List (key data) and get.
	r = e.Do(t, "GET", schemas(a), h, nil)
	if m := r.JSON(t); r.Status != 200 || m["object"] != "list" || m["data_ref"] != "data" || len(m["data"].([]any)) != 1 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", schemas(a)+"/"+id, h, nil); r.Status != 200 || r.JSON(t)["id"] != id {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", schemas(b)+"/"+id, h, nil); r.Status != 404 {
		t.Fatalf("another project's schema: %d %s", r.Status, r.Body)
	}

	// PUT: a sent definition replaced whole (its eq gone), unsent kept, a
	// deleted one still listed.
	r = e.Do(t, "PUT", schemas(a)+"/"+id, h, map[string]any{"allow_defined_only": true, "properties": map[string]any{
		"location_id": map[string]any{"type": "string", "optional": true},
		"code":        map[string]any{"deleted": true},
	}})
	m := r.JSON(t)
	if r.Status != 200 || m["updated_at"] == nil || m["allow_defined_only"] != true {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	loc = props(m)["location_id"].(map[string]any)
	code := props(m)["code"].(map[string]any)
	if loc["eq"] != nil || loc["array"] != false || loc["optional"] != true || code["deleted"] != true ||
		code["exact_length"] != float64(4) || props(m)["age"] == nil {
		t.Fatalf("updated definitions: %s", r.Body)
	}
	// A type never changes.
	r = e.Do(t, "PUT", schemas(a)+"/"+id, h, map[string]any{"properties": map[string]any{"age": map[string]any{"type": "string"}}})
	if m := r.JSON(t); r.Status != 400 || !strings.Contains(m["details"].(string), `properties["age"].type cannot change`) {
		t.Fatalf("type change: %d %s", r.Status, r.Body)
	}

	// DELETE, then gone.
	if r := e.Do(t, "DELETE", schemas(a)+"/"+id, h, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", schemas(a)+"/"+id, h, nil); r.Status != 404 || r.JSON(t)["resource_type"] != "metadata_schema" {
		t.Fatalf("deleted: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", base+"/projects/proj_missing/metadata-schemas", h, nil); r.Status != 404 {
		t.Fatalf("unknown project: %d %s", r.Status, r.Body)
	}
}

func manyDefinitions(n int) map[string]any {
	out := map[string]any{}
	for i := range n {
		out["k"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26))] = map[string]any{"type": "string"}
	}
	return out
}
