package qualifications_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A customer holding vouchers of 1,000 campaigns qualifies for exactly the
// applicable ones: not the disabled campaigns, not the ones whose rule the
// order fails; newest first by default, by discount with BEST_DEAL, paged
// by starting_after.
func TestQualificationsOverAThousandCampaigns(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	a := stacktest.NewAPI(t)
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "over 500", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{50000}}}, "logic": "1"}})
	const n = 1000
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				name := fmt.Sprintf("C%04d", i)
				c := a.OK("POST", "/v1/campaigns", map[string]any{"name": name, "campaign_type": "DISCOUNT_COUPONS", "vouchers_count": 1,
					"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1 + i}}})
				a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": name}, "customer": map[string]any{"source_id": "ann"}})
				switch {
				case i%7 == 0:
					a.OK("POST", "/v1/campaigns/"+c["id"].(string)+"/disable", nil)
				case i%10 == 3:
					a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments",
						map[string]any{"related_object_type": "campaign", "related_object_id": c["id"]})
				}
			}
		}()
	}
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		jobs <- i
		if i%7 != 0 && i%10 != 3 {
			want[fmt.Sprintf("C%04d", i)] = true
		}
	}
	close(jobs)
	wg.Wait()
	body := map[string]any{"customer": map[string]any{"source_id": "ann"}, "order": stacktest.Order([2]int{10000, 1}),
		"options": map[string]any{"limit": 50}}
	got, pages, after := map[string]bool{}, 0, ""
	var last string
	for {
		if after != "" {
			body["options"] = map[string]any{"limit": 50, "starting_after": after}
		}
		q := a.OK("POST", "/v1/qualifications", body)
		list := q["redeemables"].(map[string]any)
		if pages == 0 && stacktest.Num(list["total"]) != int64(len(want)) {
			t.Fatalf("total %v, want %d", list["total"], len(want))
		}
		for _, d := range list["data"].([]any) {
			m := d.(map[string]any)
			name := m["campaign_name"].(string)
			if !want[name] || got[name] {
				t.Fatalf("qualified %s: wanted %v, seen %v", name, want[name], got[name])
			}
			if last != "" && m["created_at"].(string) > last {
				t.Fatalf("not newest first: %s after %s", m["created_at"], last)
			}
			last = m["created_at"].(string)
			got[name] = true
		}
		pages++
		if list["has_more"] != true {
			break
		}
		after = list["more_starting_after"].(string)
	}
	if len(got) != len(want) {
		t.Fatalf("qualified %d of %d", len(got), len(want))
	}
	best := a.OK("POST", "/v1/qualifications", map[string]any{"customer": map[string]any{"source_id": "ann"},
		"order": stacktest.Order([2]int{10000, 1}), "options": map[string]any{"limit": 3, "sorting_rule": "BEST_DEAL"}})
	top := best["redeemables"].(map[string]any)["data"].([]any)
	// The largest amount_off of a qualifying campaign: 999 is i%7 != 0 and i%10 != 3? 999%7=5, 999%10=9: yes, 1000 off.
	if stacktest.Num(top[0].(map[string]any)["result"].(map[string]any)["discount"].(map[string]any)["amount_off"]) != 1000 {
		t.Fatalf("best deal: %v", top[0])
	}
	// A big order qualifies for the ruled campaigns too.
	big := a.OK("POST", "/v1/qualifications", map[string]any{"customer": map[string]any{"source_id": "ann"},
		"order": stacktest.Order([2]int{60000, 1}), "scenario": "CUSTOMER_WALLET"})
	if stacktest.Num(big["redeemables"].(map[string]any)["total"]) != int64(len(want)+100-14) {
		t.Fatalf("big order: %v", big["redeemables"].(map[string]any)["total"])
	}
	a.Fails("POST", "/v1/qualifications", map[string]any{"scenario": "EVERYTHING"}, 400, "invalid_payload")
	a.Fails("POST", "/v1/qualifications", map[string]any{"options": map[string]any{"limit": 51}}, 400, "invalid_payload")
}
