package locations_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func circle(center, radius string) map[string]any {
	return map[string]any{"type": "circle", "format": "distance", "distance": map[string]any{"center": center, "radius": radius}}
}

// A square of side 2° around (lat, lng), with a hole of side 0.5° in its
// middle.
func squareWithHole(lat, lng float64) map[string]any {
	sq := func(d float64) [][]float64 {
		return [][]float64{{lng - d, lat - d}, {lng + d, lat - d}, {lng + d, lat + d}, {lng - d, lat + d}, {lng - d, lat - d}}
	}
	return map[string]any{"type": "polygon", "format": "geojson", "geojson": map[string]any{"type": "Polygon", "coordinates": [][][]float64{sq(1), sq(0.25)}}}
}

func TestLocationsCreateReadListUpdateDelete(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	// format left out: each type has one, filled in.
	c := a.OK("POST", "/v1/locations", map[string]any{"name": "Warsaw centre",
		"shape": map[string]any{"type": "circle", "distance": map[string]any{"center": "geo:52.2297,21.0122", "radius": "1.54 km"}}})
	id, _ := c["id"].(string)
	shape, _ := c["shape"].(map[string]any)
	if !strings.HasPrefix(id, "loc_") || c["object"] != "location" || c["name"] != "Warsaw centre" || shape["format"] != "distance" ||
		shape["distance"].(map[string]any)["radius"] != "1.54 km" || c["created_at"] == nil || c["updated_at"] != nil {
		t.Fatalf("created: %v", c)
	}
	if got := a.OK("GET", "/v1/locations/"+id, nil); fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("read back %v, created %v", got, c)
	}
	p := a.OK("POST", "/v1/locations", map[string]any{"name": "Mazovia", "shape": squareWithHole(52, 21)})
	if g := p["shape"].(map[string]any)["geojson"].(map[string]any); g["type"] != "Polygon" || len(g["coordinates"].([]any)) != 2 {
		t.Fatalf("polygon: %v", p)
	}
	a.OK("POST", "/v1/locations", map[string]any{"name": "Berlin", "shape": circle("geo:52.52,13.405", "5km")})

	l := a.OK("GET", "/v1/locations", nil)
	if l["object"] != "list" || l["data_ref"] != "data" || l["total"] != 3.0 || len(l["data"].([]any)) != 3 ||
		l["data"].([]any)[0].(map[string]any)["name"] != "Berlin" {
		t.Fatalf("list (newest first): %v", l)
	}
	l = a.OK("GET", "/v1/locations?order=created_at&limit=2", nil)
	if l["has_more"] != true || l["data"].([]any)[0].(map[string]any)["id"] != id || l["total"] != 3.0 {
		t.Fatalf("oldest first, two: %v", l)
	}
	l = a.OK("GET", "/v1/locations?order=created_at&limit=2&starting_after_id="+l["more_starting_after"].(string), nil)
	if len(l["data"].([]any)) != 1 || l["data"].([]any)[0].(map[string]any)["name"] != "Berlin" || l["has_more"] != false {
		t.Fatalf("the next page: %v", l)
	}
	l = a.OK("GET", "/v1/locations?"+url.Values{"filters[name][conditions][$starts_with]": {"Ma"}}.Encode(), nil)
	if l["total"] != 1.0 || l["data"].([]any)[0].(map[string]any)["id"] != p["id"] {
		t.Fatalf("filtered by name: %v", l)
	}
	if l = a.OK("GET", "/v1/locations?end_date="+url.QueryEscape(p["created_at"].(string)), nil); l["total"] != 1.0 {
		t.Fatalf("created before the polygon: %v", l)
	}

	u := a.OK("PUT", "/v1/locations/"+id, map[string]any{"name": "Old town"})
	if u["name"] != "Old town" || u["updated_at"] == nil || fmt.Sprint(u["shape"]) != fmt.Sprint(c["shape"]) {
		t.Fatalf("renamed: %v", u)
	}
	if l = a.OK("GET", "/v1/locations?order=-updated_at&limit=1", nil); l["data"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("last updated first: %v", l)
	}

	for _, b := range []map[string]any{{}, {"name": "x"}, {"shape": circle("geo:1,1", "1 km")}, {"name": " ", "shape": circle("geo:1,1", "1 km")},
		{"name": "x", "shape": circle("geo:1,1", "1 parsec")}, {"name": "x", "shape": circle("geo:100,1", "1 km")},
		{"name": "x", "shape": map[string]any{"type": "polygon", "geojson": map[string]any{"type": "Polygon", "coordinates": [][][]float64{{{0, 0}, {1, 0}, {1, 1}}}}}},
		{"name": "x", "shape": "circle"}, {"name": "x", "shape": nil}} {
		a.Fails("POST", "/v1/locations", b, http.StatusBadRequest, "invalid_payload")
	}
	if e := a.Fails("POST", "/v1/locations", map[string]any{"name": "x", "shape": circle("geo:1,1", "far")}, 400, "invalid_payload"); !strings.Contains(fmt.Sprint(e["details"]), "shape.distance.radius") {
		t.Fatalf("a bad radius is named: %v", e)
	}
	a.Fails("PUT", "/v1/locations/"+id, map[string]any{"shape": map[string]any{"type": "hexagon"}}, http.StatusBadRequest, "invalid_payload")
	a.Fails("GET", "/v1/locations?order=name", nil, http.StatusBadRequest, "invalid_query_params")
	a.Fails("GET", "/v1/locations?filters[shape][conditions][$is]=x", nil, http.StatusBadRequest, "invalid_query_params")
	a.Fails("GET", "/v1/locations?end_date=yesterday", nil, http.StatusBadRequest, "invalid_query_params")

	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	other.Fails("GET", "/v1/locations/"+id, nil, http.StatusNotFound, "not_found")
	other.Fails("PUT", "/v1/locations/"+id, map[string]any{"name": "mine"}, http.StatusNotFound, "not_found")
	other.Fails("DELETE", "/v1/locations/"+id, nil, http.StatusNotFound, "not_found")
	if l := other.OK("GET", "/v1/locations", nil); l["total"] != 0.0 {
		t.Fatalf("the other project's list: %v", l)
	}

	if r := a.Do("DELETE", "/v1/locations/"+id, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/locations/"+id, nil, http.StatusNotFound, "not_found")
	a.Fails("DELETE", "/v1/locations/"+id, nil, http.StatusNotFound, "not_found")
}

// A validation rule admits a customer whose geopoint metadata lies in one
// of the locations it names, and an order whose own does; the point must
// be in the area itself, not in its hole, and a location moved or deleted
// is in force for the next validation.
func TestValidationRuleInLocation(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	poly := a.OK("POST", "/v1/locations", map[string]any{"name": "Mazovia", "shape": squareWithHole(52, 21)})["id"].(string)
	berlin := a.OK("POST", "/v1/locations", map[string]any{"name": "Berlin", "shape": circle("geo:52.52,13.405", "5 km")})["id"].(string)
	v := a.Voucher("GEO", stacktest.PercentOff(10))
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "local", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "customer.metadata", "property": "geo",
			"conditions": map[string]any{"$in_location": []any{poly, berlin}}, "error": map[string]any{"message": "Local customers only."}},
			"2":     map[string]any{"name": "order.metadata", "property": "store", "conditions": map[string]any{"$in_location": []any{berlin}}},
			"logic": "1 or 2"}})
	a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})

	valid := func(customerGeo, storeGeo any) bool {
		t.Helper()
		body := map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "GEO"}}, "order": stacktest.Order([2]int{5000, 1}),
			"customer": map[string]any{"source_id": "ann", "metadata": map[string]any{"geo": customerGeo}}}
		if storeGeo != nil {
			body["order"].(map[string]any)["metadata"] = map[string]any{"store": storeGeo}
		}
		return a.OK("POST", "/v1/validations", body)["valid"] == true
	}
	for _, tc := range []struct {
		name          string
		customer, ord any
		want          bool
	}{
		{"in the polygon", "geo:51.5,20.5", nil, true},
		{"in the polygon's hole", "geo:52.1,21.1", nil, false},
		{"outside both", "geo:50.06,19.94", nil, false},
		{"in Berlin", "geo:52.53,13.41", nil, true},
		{"not a geopoint", "Warsaw", nil, false},
		{"no geopoint", nil, nil, false},
		{"a list, one in", []any{"geo:0,0", "geo:51.5,20.5"}, nil, true},
		{"the order's store in Berlin", "geo:0,0", "geo:52.5,13.4", true},
		{"the order's store in the polygon, which 2 does not name", "geo:0,0", "geo:51.5,20.5", false},
	} {
		if got := valid(tc.customer, tc.ord); got != tc.want {
			t.Errorf("%s: valid = %v, want %v", tc.name, got, tc.want)
		}
	}

	// Berlin moved to Warsaw: the next validation reads the new circle.
	a.OK("PUT", "/v1/locations/"+berlin, map[string]any{"shape": circle("geo:52.2297,21.0122", "1 km")})
	if valid("geo:52.53,13.41", nil) || !valid("geo:52.2297,21.0122", nil) {
		t.Error("a moved location is not in force for the next validation")
	}
	if r := a.Do("DELETE", "/v1/locations/"+poly, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.Status)
	}
	if valid("geo:51.5,20.5", nil) {
		t.Error("a deleted location still admits")
	}

	// The rule's grammar: $in_location takes location ids, on metadata.
	for _, cond := range []map[string]any{
		{"name": "customer.metadata", "property": "geo", "conditions": map[string]any{"$in_location": []any{}}},
		{"name": "customer.metadata", "property": "geo", "conditions": map[string]any{"$in_location": []any{5}}},
		{"name": "order.amount", "conditions": map[string]any{"$in_location": []any{berlin}}},
	} {
		a.Fails("POST", "/v1/validation-rules", map[string]any{"name": "bad", "type": "advanced", "rules": map[string]any{"1": cond, "logic": "1"}},
			http.StatusBadRequest, "invalid_payload")
	}
}
