package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func schemasURL(a stacktest.API) string {
	return "http://api.localhost/management/v1/projects/" + a.P.ID + "/metadata-schemas"
}

// The read API answers the management API's schemas to application keys:
// unpaged under data_ref "schemas", camelCase definitions as the
// JavaScript SDK types them, one resource's by its name.
func TestMetadataSchemasReadAPI(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	if r := a.OK("GET", "/v1/metadata-schemas", nil); r["data_ref"] != "schemas" || len(r["schemas"].([]any)) != 0 {
		t.Fatalf("no schemas: %v", r)
	}
	a.MetadataSchema("street_address", map[string]any{"zip": map[string]any{"type": "string", "exact_length": 5}})
	made := a.MetadataSchema("customer", map[string]any{
		"nick":    map[string]any{"type": "string", "min_length": 2, "max_length": 8, "optional": false},
		"home":    map[string]any{"type": "object", "object_type": "street_address"},
		"visits":  map[string]any{"type": "number", "gte": 0, "array": true},
		"retired": map[string]any{"type": "boolean"},
	})
	list := a.OK("GET", "/v1/metadata-schemas", nil)
	if list["object"] != "list" || list["data_ref"] != "schemas" || stacktest.Num(list["total"]) != 2 ||
		len(list["schemas"].([]any)) != 2 {
		t.Fatalf("list: %v", list)
	}
	s := a.OK("GET", "/v1/metadata-schemas/customer", nil)
	props := s["properties"].(map[string]any)
	nick, home, visits := props["nick"].(map[string]any), props["home"].(map[string]any), props["visits"].(map[string]any)
	if s["id"] != made["id"] || s["object"] != "metadata_schema" || s["related_object"] != "customer" ||
		s["allow_defined_only"] != false || nick["minLength"] != 2.0 || nick["maxLength"] != 8.0 || nick["min_length"] != nil ||
		nick["optional"] != false || home["objectType"] != "street_address" || home["object_type"] != nil ||
		visits["array"] != true || visits["gte"] != 0.0 {
		t.Fatalf("customer schema: %v", s)
	}
	if r := a.OK("GET", "/v1/metadata-schemas/street_address", nil); r["properties"].(map[string]any)["zip"].(map[string]any)["exactLength"] != 5.0 {
		t.Fatalf("custom object's schema: %v", r)
	}
	if m := a.Fails("GET", "/v1/metadata-schemas/voucher", nil, 404, "not_found"); m["resource_type"] != "metadata_schema" {
		t.Fatalf("no voucher schema: %v", m)
	}

	// Writes follow it: every failing key named, a nested object's keys by
	// their path, required keys on create, the merged result on update.
	bad := a.Fails("POST", "/v1/customers", map[string]any{"source_id": "ann", "metadata": map[string]any{
		"nick": "a", "home": map[string]any{"zip": "123"}, "visits": 3, "retired": "no", "free": "kept"}}, 400,
		"metadata_validation_failed")
	if bad["message"] != "Metadata validation failed" || bad["details"] != "home.zip: must be exactly 5 characters long "+
		"(actual length is 3), nick: must be at least 2 characters long (actual length is 1), retired: must be a boolean, "+
		"visits: must be an array" {
		t.Fatalf("refused: %v", bad)
	}
	if m := a.Fails("POST", "/v1/customers", map[string]any{"source_id": "ann"}, 400, "metadata_validation_failed"); m["details"] != "nick: is required" {
		t.Fatalf("required on create: %v", m)
	}
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann", "metadata": map[string]any{"nick": "ann", "free": 1}})
	a.OK("PUT", "/v1/customers/ann", map[string]any{"name": "Ann"}) // no metadata sent: not checked
	if m := a.Fails("PUT", "/v1/customers/ann", map[string]any{"metadata": map[string]any{"visits": []any{-1}}}, 400,
		"metadata_validation_failed"); m["details"] != "nick: is required, visits: item 0 must be greater than or equal to 0 (actual value is -1)" {
		t.Fatalf("update: %v", m)
	}
}

// A schema created, changed or deleted in the management API is in force
// in the regional service within 2 seconds (the directory's change log
// drops the cached schemas).
func TestMetadataSchemaChangesInForceWithin2s(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	h := a.E.MgmtHeader()
	n := 0
	write := func(md map[string]any) int {
		n++
		return a.Do("POST", "/v1/customers", map[string]any{"source_id": "c" + strings.Repeat("x", n), "metadata": md}).Status
	}
	// The schemas are cached before the change: a write reads them.
	if s := write(map[string]any{"tier": "gold"}); s != 200 {
		t.Fatalf("no schema yet: %d", s)
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("%s: not in force within 2 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	r := a.E.Do(t, "POST", schemasURL(a), h, map[string]any{"related_object": "customer", "properties": map[string]any{
		"tier": map[string]any{"type": "number"}}})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["id"].(string)
	within("created", func() bool { return write(map[string]any{"tier": "gold"}) == 400 })
	if r := a.E.Do(t, "PUT", schemasURL(a)+"/"+id, h, map[string]any{"properties": map[string]any{
		"tier": map[string]any{"deleted": true}}}); r.Status != 200 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	within("deleted definition", func() bool { return write(map[string]any{"tier": "gold"}) == 200 })
	if r := a.E.Do(t, "PUT", schemasURL(a)+"/"+id, h, map[string]any{"allow_defined_only": true}); r.Status != 200 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	within("allow_defined_only", func() bool { return write(map[string]any{"other": 1}) == 400 })
	if r := a.E.Do(t, "DELETE", schemasURL(a)+"/"+id, h, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	within("schema deleted", func() bool { return write(map[string]any{"other": 1}) == 200 })
}
