package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A custom event's rule reads the event's metadata through its validation
// rule: the context of a custom event is its customer and its metadata.
func TestCustomEventRuleWithAValidationRuleEarnsOnlyForEventsThatMeetIt(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Visits", nil)["id"].(string)
	code := a.Member(campID, "ann")["code"].(string)
	r := a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/custom-event-schemas", a.E.MgmtHeader(),
		map[string]any{"name": "store_visit", "schema": map[string]any{"properties": map[string]any{"spent": map[string]any{"type": "number"}}}})
	if r.Status != 200 {
		t.Fatalf("schema: %d %s", r.Status, r.Body)
	}
	sc := r.JSON(t)
	big := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "Big spenders", "rules": map[string]any{"1": map[string]any{
		"name": "custom_event.metadata", "property": "spent", "conditions": map[string]any{"$more_than": []int{50}}}, "logic": "1"}})
	visit := func(pts int, extra map[string]any) map[string]any {
		b := map[string]any{"event": "store_visit", "custom_event": map[string]any{"schema_id": sc["id"]},
			"loyalty": map[string]any{"type": "FIXED", "points": pts}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	gated := rule(a, campID, visit(10, map[string]any{"validation_rule_id": big["id"]}))
	witness := rule(a, campID, visit(1, nil))
	send := func(spent int) {
		stacktest.Eventually(t, 3*time.Second, "the event accepted", func() bool {
			r := a.Do("POST", "/v1/events", map[string]any{"event": "store_visit", "customer": map[string]any{"source_id": "ann"},
				"metadata": map[string]any{"spent": spent}})
			if r.Status != 200 && (r.Status != 400 || !strings.Contains(string(r.Body), "has no schema")) {
				t.Fatalf("event: %d %s", r.Status, r.Body)
			}
			return r.Status == 200
		})
	}
	send(20)
	if got := earned(t, a, code, 1); got[witness["id"].(string)] != 1 || got[gated["id"].(string)] != 0 {
		t.Fatalf("a small visit earned %v", got)
	}
	send(80)
	if got := earned(t, a, code, 3); got[witness["id"].(string)] != 2 || got[gated["id"].(string)] != 10 {
		t.Fatalf("a big visit earned %v", got)
	}
}
