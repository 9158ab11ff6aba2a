package templates

import (
	"encoding/json"
	"strings"
	"testing"
)

// A copy into another project is refused exactly when its rules or
// settings name an object id of its project, each named once; a copy
// within its project, or an export without its source, is not.
func TestACopyNamingItsProjectsObjectsIsNotPortable(t *testing.T) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	seg, prod := "seg_0c9dd3c2e392f78613", "prod_0c9dd3c2e392f78614"
	rule := map[string]json.RawMessage{"rules": raw(map[string]any{"1": map[string]any{"name": "customer.segment",
		"conditions": map[string]any{"$is": []any{seg, seg}}}}), "applicable_to": raw(map[string]any{"data": []any{
		map[string]any{"object": "product", "id": prod}}})}
	plain := map[string]json.RawMessage{"rules": raw(map[string]any{"1": map[string]any{"name": "order.amount",
		"conditions": map[string]any{"$more_than": []any{5000}}}}), "metadata": raw(map[string]any{"note": "seg_short"})}
	for _, c := range []struct {
		name    string
		copy    Copy
		dest    string
		refused []string
	}{
		{"names a segment and a product", Copy{SourceProject: "proj_a", Rules: []map[string]json.RawMessage{rule}}, "proj_b", []string{prod, seg}},
		{"within its project", Copy{SourceProject: "proj_a", Rules: []map[string]json.RawMessage{rule}}, "proj_a", nil},
		{"without its source", Copy{Rules: []map[string]json.RawMessage{rule}}, "proj_b", nil},
		{"names nothing of its project", Copy{SourceProject: "proj_a", Rules: []map[string]json.RawMessage{plain}}, "proj_b", nil},
		{"in its settings", Copy{SourceProject: "proj_a", Body: map[string]json.RawMessage{"loc": raw([]any{"loc_0c9dd3c2e392f78615"})}},
			"proj_b", []string{"loc_0c9dd3c2e392f78615"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.copy.checkPortable(c.dest)
			if (err != nil) != (c.refused != nil) {
				t.Fatalf("refused: %v, want %v", err, c.refused)
			}
			if err != nil && !strings.Contains(err.Error(), strings.Join(c.refused, ", ")) {
				t.Fatalf("the refusal %v does not name %v", err, c.refused)
			}
		})
	}
}
