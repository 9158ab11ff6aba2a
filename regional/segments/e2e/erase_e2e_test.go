package e2e_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A permanent deletion ends the customer's membership of every segment,
// static and auto-update, and each end is a customer.segment.left notice
// that reaches the webhook with the segment and the customer by its id
// alone: no personal property, and none of the customer's values anywhere
// in the notice, though the erasure redacts the outbox's payloads.
func TestPermanentDeletionRaisesSegmentLeftWithTheIDOnly(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.segment.left")
	personal := []string{"Dora Erased", "dora.erased@example.com", "dora-erased", "+48 500 600 700"}
	dora := a.OK("POST", "/v1/customers", map[string]any{"source_id": "dora-erased", "name": "Dora Erased",
		"email": "dora.erased@example.com", "phone": "+48 500 600 700", "metadata": map[string]any{"tier": "gold"}})["id"].(string)
	static := a.OK("POST", "/v1/segments", map[string]any{"name": "Chosen", "type": "static", "customers": []any{dora}})["id"].(string)
	gold := a.OK("POST", "/v1/segments", map[string]any{"name": "Gold", "type": "auto-update",
		"filter": map[string]any{"junction": "and", "metadata.tier": map[string]any{"conditions": map[string]any{"$is": []any{"gold"}}}}})["id"].(string)
	waitMembers(a, gold, dora)
	waitMembers(a, static, dora)

	del := a.OK("POST", "/v1/customers/"+dora+"/permanent-deletion", nil)
	if del["status"] != "DONE" || del["data_json"].(map[string]any)["segments"] != float64(2) {
		t.Fatalf("deletion: %v", del)
	}
	hooks.Wait(t, "customer.segment.left", 2)
	time.Sleep(300 * time.Millisecond) // any late notice would have come
	left := hooks.All("customer.segment.left")
	if len(left) != 2 {
		t.Fatalf("%d customer.segment.left notices, want 2: %v", len(left), left)
	}
	var segs []string
	for _, ev := range left {
		c := ev["customer"].(map[string]any)
		if c["id"] != dora || c["object"] != "customer" || len(c) != 2 {
			t.Fatalf("the customer of a left notice: %v, want only its id and object", c)
		}
		seg := ev["segment"].(map[string]any)
		if seg["object"] != "segment" || (seg["name"] != "Chosen" && seg["name"] != "Gold") {
			t.Fatalf("the segment of a left notice: %v", seg)
		}
		segs = append(segs, seg["id"].(string))
		stacktest.ConformsTo(t, "EventCustomerSegmentLeft", ev)
		b, _ := json.Marshal(ev)
		for _, v := range personal {
			if strings.Contains(string(b), v) {
				t.Fatalf("a left notice holds %q: %s", v, b)
			}
		}
	}
	if slices.Sort(segs); !slices.Equal(segs, sorted(static, gold)) {
		t.Fatalf("left segments %v, want %v", segs, sorted(static, gold))
	}
	waitMembers(a, gold)
	waitMembers(a, static)
}
