package e2e_test

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// The customers list filters by metadata with the interface's filters
// syntax ($is and $in, text values matching numbers and booleans too, and
// or), counts only the matches in total, keeps other projects' customers
// out, and refuses what it does not serve by name.
func TestCustomerListFiltersByMetadata(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	p, other := e.CreateProject(t, "api"), e.CreateProject(t, "api")
	u := func(path string) string { return stacktest.URL("api", path) }
	metas := map[string]map[string]any{
		"a": {"tier": "gold", "n": 5}, "b": {"tier": "gold", "n": 6}, "c": {"tier": "silver", "n": 5, "vip": true},
		"d": {"tier": "bronze"}, "e": {},
	}
	for src, m := range metas {
		if r := e.Do(t, "POST", u("/v1/customers"), p.Header(), map[string]any{"source_id": src, "metadata": m}); r.Status != 200 {
			t.Fatal(string(r.Body))
		}
	}
	if r := e.Do(t, "POST", u("/v1/customers"), other.Header(), map[string]any{"source_id": "x", "metadata": map[string]any{"tier": "gold"}}); r.Status != 200 {
		t.Fatal(string(r.Body))
	}
	for q, want := range map[string]string{
		"filters[metadata.tier][conditions][$is]=gold": "a,b",
		"filters[metadata.tier][$is]=gold":             "a,b",
		"filters[metadata.tier][conditions][$in][0]=gold&filters[metadata.tier][conditions][$in][1]=bronze":          "a,b,d",
		"filters[metadata.n][conditions][$is]=5":                                                                     "a,c",
		"filters[metadata.vip][conditions][$is]=true":                                                                "c",
		"filters[metadata.tier][conditions][$is]=gold&filters[metadata.n][conditions][$is]=5":                        "a",
		"filters[metadata.tier][conditions][$is]=bronze&filters[metadata.n][conditions][$is]=6&filters[junction]=or": "b,d",
		"filters[metadata.tier][conditions][$is]=platinum":                                                           "",
	} {
		r := e.Do(t, "GET", u("/v1/customers?limit=100&"+q), p.Header(), nil)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", q, r.Status, r.Body)
		}
		m := r.JSON(t)
		var got []string
		for _, c := range m["customers"].([]any) {
			got = append(got, c.(map[string]any)["source_id"].(string))
		}
		sort.Strings(got)
		if strings.Join(got, ",") != want || m["total"] != float64(len(got)) {
			t.Errorf("%s: got %v (total %v), want %s", q, got, m["total"], want)
		}
	}
	// Paged by the cursor in each order, the matches come once each.
	for _, order := range []string{"created_at", "-created_at", "source_id", "-updated_at"} {
		var seen []string
		cursor := ""
		for pages := 0; pages < 5; pages++ {
			r := e.Do(t, "GET", u("/v1/customers?limit=1&filters[metadata.tier][$in][]=gold&filters[metadata.tier][$in][]=silver&order="+
				order+"&starting_after_id="+cursor), p.Header(), nil)
			m := r.JSON(t)
			if r.Status != 200 || m["total"] != float64(3) {
				t.Fatalf("%s: %d %s", order, r.Status, r.Body)
			}
			for _, c := range m["customers"].([]any) {
				seen = append(seen, c.(map[string]any)["source_id"].(string))
			}
			if m["has_more"] != true {
				break
			}
			cursor = m["more_starting_after"].(string)
		}
		sort.Strings(seen)
		if strings.Join(seen, ",") != "a,b,c" {
			t.Errorf("%s: paged through %v", order, seen)
		}
	}
	for q, param := range map[string]string{
		"filters[metadata.tier][conditions][$contains]=go":                                    "filters[metadata.tier]",
		"filters[name][conditions][$is]=x":                                                    "filters[name]",
		"filters[metadata.tier][conditions][$is]=a&filters[metadata.tier][conditions][$is]=b": "filters[metadata.tier]",
	} {
		r := e.Do(t, "GET", u("/v1/customers?"+q), p.Header(), nil)
		m := r.JSON(t)
		if r.Status != 400 || m["key"] != "invalid_query_params" || !strings.Contains(fmt.Sprint(m["details"]), param) {
			t.Errorf("%s: want 400 naming %s, got %d %s", url.QueryEscape(q), param, r.Status, r.Body)
		}
	}
}
