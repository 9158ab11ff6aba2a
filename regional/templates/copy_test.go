package templates

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// A copy finds each object id its rules and settings name once, and a
// setup rewrites every one of them (and nothing that only looks like one)
// to the destination's.
func TestACopyFindsAndRewritesItsProjectsObjects(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	seg, prod, loc := "seg_0c9dd3c2e392f78613", "prod_0c9dd3c2e392f78614", "loc_0c9dd3c2e392f78615"
	rule := raw(map[string]any{"rules": map[string]any{"1": map[string]any{"name": "customer.segment",
		"conditions": map[string]any{"$is": []any{seg, seg}}}}, "applicable_to": map[string]any{"data": []any{
		map[string]any{"object": "product", "id": prod}}}, "note": "seg_short", "where": []any{loc}})
	if got, want := idsIn(rule), []string{loc, prod, seg}; !slices.Equal(sorted(got), want) {
		t.Fatalf("idsIn = %v, want %v", got, want)
	}
	out := string(rewrite(rule, map[string]string{seg: "seg_new", prod: "prod_new", loc: "loc_new"}))
	for _, s := range []string{seg, prod, loc} {
		if strings.Contains(out, s) {
			t.Fatalf("%s left in %s", s, out)
		}
	}
	if !strings.Contains(out, `"seg_short"`) || strings.Count(out, "seg_new") != 2 || !strings.Contains(out, "prod_new") {
		t.Fatalf("rewritten wrongly: %s", out)
	}
	if idsIn(raw(map[string]any{"note": "seg_short"})) != nil {
		t.Fatal("a string that only starts like an id was taken for one")
	}
}

// Only a static segment is refused, named, for its members are customers.
func TestACopyRefusesOnlyStaticSegments(t *testing.T) {
	cs := []Carried{{ID: "prod_1", Object: "product"}, {ID: "seg_1", Object: "segments"}, {ID: "seg_2", Object: "segments", Static: true}}
	err := checkCarried(cs, "proj_a", "proj_b")
	if err == nil || !strings.Contains(err.Error(), "seg_2") || strings.Contains(err.Error(), "seg_1") {
		t.Fatalf("refusal %v, want one naming seg_2 alone", err)
	}
	if err := checkCarried(cs[:2], "proj_a", "proj_b"); err != nil {
		t.Fatalf("refused %v", err)
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
