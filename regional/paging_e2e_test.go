package regional_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// pagedList is a list the reference pages with `page`, as the test reads it.
type pagedList struct {
	path   string // with its query's start (a filter), if any
	max    int    // the reference's maximum page
	cursor bool   // it has starting_after_id too
}

// seedPagedLists makes at least five rows of every list the reference
// pages by number, in one project, and returns the lists.
func seedPagedLists(t *testing.T, a stacktest.API) []pagedList {
	t.Helper()
	program := a.Campaign("Program", nil)["id"].(string)
	for i := 2; i <= 5; i++ {
		a.Campaign(fmt.Sprintf("Program %d", i), nil)
	}
	var codes []string
	for i := range 5 {
		codes = append(codes, a.Member(program, fmt.Sprintf("member-%d", i))["code"].(string))
	}
	today := a.E.Clock.Today()
	for i := range 5 { // one bucket per date
		a.OK("POST", "/v1/loyalties/members/"+codes[0]+"/balance", map[string]any{"points": 10 + i,
			"expiration_type": "CUSTOM_DATE", "expiration_date": today.AddDate(0, 0, 10+i).Format(time.DateOnly)})
	}
	var rules []map[string]any
	for i := range 5 {
		rules = append(rules, map[string]any{"event": "order.paid", "loyalty": map[string]any{"type": "FIXED", "points": 1 + i}})
	}
	if r := a.Do("POST", "/v1/loyalties/"+program+"/earning-rules", rules); r.Status != 200 {
		t.Fatalf("earning rules: %d %s", r.Status, r.Body)
	}
	var tiers []map[string]any
	for i := range 5 {
		tiers = append(tiers, map[string]any{"name": fmt.Sprintf("Tier %d", i), "points": map[string]any{"from": i * 100, "to": i*100 + 99}})
	}
	if r := a.Do("POST", "/v1/loyalties/"+program+"/tiers", tiers); r.Status != 200 {
		t.Fatalf("tiers: %d %s", r.Status, r.Body)
	}
	var product string
	for i := range 5 {
		id := a.OK("POST", "/v1/products", map[string]any{"name": fmt.Sprintf("Product %d", i), "source_id": fmt.Sprintf("p-%d", i)})["id"].(string)
		if product == "" {
			product = id
		}
		a.OK("POST", "/v1/products/"+product+"/skus", map[string]any{"sku": fmt.Sprintf("S%d", i), "source_id": fmt.Sprintf("s-%d", i)})
		reward := a.OK("POST", "/v1/rewards", map[string]any{"name": fmt.Sprintf("Reward %d", i),
			"parameters": map[string]any{"product": map[string]any{"id": id}}})["id"].(string)
		a.OK("POST", "/v1/loyalties/"+program+"/rewards", []map[string]any{{"reward": reward,
			"parameters": map[string]any{"loyalty": map[string]any{"points": 10 + i}}}})
		a.OK("POST", "/v1/orders", map[string]any{"source_id": fmt.Sprintf("o-%d", i), "amount": 100 + i})
	}
	spring := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Spring", "campaign_type": "DISCOUNT_COUPONS", "type": "STATIC",
		"vouchers_count": 5, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 500},
			"code_config": map[string]any{"pattern": "SPR-######"}}})
	if id, ok := spring["async_action_id"].(string); ok {
		a.WaitAction(id)
	}
	var vouchers []string
	for range 5 {
		p := a.OK("POST", "/v1/publications", map[string]any{"campaign": "Spring", "customer": map[string]any{"source_id": "ann"}})
		vouchers = append(vouchers, p["voucher"].(map[string]any)["code"].(string))
	}
	var rule string
	for i := range 5 {
		id := a.OK("POST", "/v1/validation-rules", map[string]any{"name": fmt.Sprintf("Rule %d", i), "type": "advanced",
			"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{i}}}, "logic": "1"}})["id"].(string)
		if rule == "" {
			rule = id
		}
		a.OK("POST", "/v1/validation-rules/"+rule+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": vouchers[i]})
	}
	var promoTiers []any
	for i := range 5 {
		promoTiers = append(promoTiers, map[string]any{"name": fmt.Sprintf("Promo %d", i), "banner": "!",
			"action": map[string]any{"discount": map[string]any{"type": "PERCENT", "percent_off": 5 + i}}})
	}
	promo := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Promo", "campaign_type": "PROMOTION", "promotion": map[string]any{"tiers": promoTiers}})
	var tierIDs []any
	for _, t := range promo["promotion"].(map[string]any)["tiers"].([]any) {
		tierIDs = append(tierIDs, t.(map[string]any)["id"])
	}
	for i := range 5 {
		a.OK("POST", "/v1/promotions/"+promo["id"].(string)+"/stacks", map[string]any{"name": fmt.Sprintf("Stack %d", i),
			"tiers": map[string]any{"ids": tierIDs[:2], "hierarchy_mode": "MANUAL"}})
	}
	for i := range 5 {
		a.OK("POST", "/v1/exports", map[string]any{"exported_object": "customer"})
		a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": vouchers[i]}},
			"order": stacktest.Order([2]int{1000, 1})})
	}
	var coll string
	for i := range 5 {
		members := []any{map[string]any{"id": product, "object": "product"}}
		if i == 0 {
			for _, s := range a.OK("GET", "/v1/products/"+product+"/skus", nil)["skus"].([]any) {
				members = append(members, map[string]any{"id": s.(map[string]any)["id"], "object": "sku"})
			}
		}
		id := a.OK("POST", "/v1/product-collections", map[string]any{"name": fmt.Sprintf("Collection %d", i), "products": members})["id"].(string)
		if coll == "" {
			coll = id
		}
	}
	return []pagedList{
		{"/v1/product-collections", 100, false},
		{"/v1/product-collections/" + coll + "/products", 100, false},
		{"/v1/customers", 99, true},
		{"/v1/vouchers", 99, true},
		{"/v1/redemptions", 99, false},
		{"/v1/campaigns", 100, true},
		{"/v1/loyalties", 100, true},
		{"/v1/loyalties/" + program + "/members", 100, true},
		{"/v1/loyalties/" + program + "/members/" + codes[0] + "/points-expiration", 100, false},
		{"/v1/loyalties/" + program + "/earning-rules", 100, false},
		{"/v1/loyalties/" + program + "/tiers", 100, false}, // pages here too, though its reference has none
		{"/v1/loyalties/" + program + "/rewards", 100, true},
		{"/v1/rewards", 100, true},
		{"/v1/publications", 100, true},
		{"/v1/orders", 100, true},
		{"/v1/products", 100, true},
		{"/v1/products/" + product + "/skus", 100, true},
		{"/v1/validation-rules", 100, true},
		{"/v1/validation-rules/" + rule + "/assignments", 100, true},
		{"/v1/validation-rules-assignments?rule=" + rule, 100, true},
		{"/v1/promotions/tiers", 100, true},
		{"/v1/promotions/stacks", 100, true},
		{"/v1/promotions/stacks?order=-name&created_at%5Bafter%5D=2024-01-01", 100, true},
		{"/v1/exports", 100, true},
	}
}

// ids reads a list answer: its rows' ids, has_more and total (-1 when the
// list has none).
func ids(t *testing.T, l map[string]any) (out []string, more bool, total int) {
	t.Helper()
	ref, _ := l["data_ref"].(string)
	rows, ok := l[ref].([]any)
	if !ok {
		t.Fatalf("no %q array: %v", ref, l)
	}
	for _, r := range rows {
		out = append(out, r.(map[string]any)["id"].(string))
	}
	total = -1
	if n, ok := l["total"].(float64); ok {
		total = int(n)
	}
	return out, l["has_more"] == true, total
}

func query(path, q string) string {
	if strings.Contains(path, "?") {
		return path + "&" + q
	}
	return path + "?" + q
}

// Every list the reference pages with `page` serves page N as the rows at
// positions (N-1)×limit+1 … N×limit of its order, has_more and total right
// on each; past the reference's maximum page, and with page and
// starting_after_id together, it answers 400 naming them.
func TestEveryListPagesAsTheReferenceSays(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	for _, l := range seedPagedLists(t, a) {
		t.Run(l.path, func(t *testing.T) {
			all, more, total := ids(t, a.OK("GET", query(l.path, "limit=100"), nil))
			if len(all) < 5 || more || (total != -1 && total != len(all)) {
				t.Fatalf("all: %d rows, has_more %v, total %d", len(all), more, total)
			}
			for page := 1; page <= 4; page++ {
				got, more, n := ids(t, a.OK("GET", query(l.path, fmt.Sprintf("limit=2&page=%d", page)), nil))
				want := all[min(2*(page-1), len(all)):min(2*page, len(all))]
				if !slices.Equal(got, want) || more != (len(all) > 2*page) || n != total {
					t.Fatalf("page %d: %v has_more %v total %d, want %v has_more %v total %d (all %v)",
						page, got, more, n, want, len(all) > 2*page, total, all)
				}
			}
			e := a.Fails("GET", query(l.path, fmt.Sprintf("page=%d", l.max+1)), nil, 400, "page_over_limit")
			if d, _ := e["details"].(string); !strings.HasPrefix(d, fmt.Sprintf("page: at most %d", l.max)) {
				t.Fatalf("page %d: %v", l.max+1, e)
			}
			a.OK("GET", query(l.path, fmt.Sprintf("limit=1&page=%d", l.max)), nil) // past the end: empty, not refused
			if l.cursor {
				e := a.Fails("GET", query(l.path, "page=2&starting_after_id="+all[0]), nil, 400, "invalid_query_params")
				if d, _ := e["details"].(string); !strings.HasPrefix(d, "page, starting_after_id:") {
					t.Fatalf("page with starting_after_id: %v", e)
				}
			}
		})
	}
}

// What a page means while rows are added (README, Lists): each page is
// read when it is asked for, and a new row is the newest. In a newest-first
// order it comes first, so page 2 starts one row earlier (its first row was
// page 1's last): a row is seen twice and none is missed. In an oldest-first
// order it comes last, so the pages before it do not move. The cursor
// continues after the last row seen: neither.
func TestPagesWhileRowsAreAdded(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	for i := range 5 {
		a.OK("POST", "/v1/customers", map[string]any{"source_id": fmt.Sprintf("c-%d", i)})
		a.OK("POST", "/v1/products", map[string]any{"name": fmt.Sprintf("Product %d", i)})
	}
	before, _, _ := ids(t, a.OK("GET", "/v1/customers?limit=100", nil)) // newest first
	p1, _, _ := ids(t, a.OK("GET", "/v1/customers?limit=2&page=1", nil))
	a.OK("POST", "/v1/customers", map[string]any{"source_id": "late"})
	p2, more, total := ids(t, a.OK("GET", "/v1/customers?limit=2&page=2", nil))
	if !slices.Equal(p1, before[:2]) || !slices.Equal(p2, before[1:3]) || !more || total != 6 {
		t.Fatalf("newest first: page 1 %v, page 2 after an insert %v (has_more %v, total %d), before %v", p1, p2, more, total, before)
	}
	next, _, _ := ids(t, a.OK("GET", "/v1/customers?limit=2&starting_after_id="+p1[1], nil))
	if !slices.Equal(next, before[2:4]) {
		t.Fatalf("cursor after an insert: %v, want %v", next, before[2:4])
	}

	before, _, _ = ids(t, a.OK("GET", "/v1/products?limit=100", nil)) // oldest first
	a.OK("POST", "/v1/products", map[string]any{"name": "Late"})
	p2, _, _ = ids(t, a.OK("GET", "/v1/products?limit=2&page=2", nil))
	p3, more, _ := ids(t, a.OK("GET", "/v1/products?limit=2&page=3", nil))
	if !slices.Equal(p2, before[2:4]) || len(p3) != 2 || p3[0] != before[4] || more {
		t.Fatalf("oldest first: page 2 %v, page 3 %v (has_more %v) after an insert, before %v", p2, p3, more, before)
	}
}

// A documented filter a list does not apply is refused by name, never
// ignored; one it applies narrows the list.
func TestListFiltersWorkOrAreRefused(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	program := a.Campaign("Program", nil)["id"].(string)
	var cards []map[string]any
	for _, m := range []string{"m1", "m2", "m3"} {
		cards = append(cards, a.Member(program, m))
	}
	members := "/v1/loyalties/" + program + "/members?"
	for _, c := range []struct {
		query string
		want  []map[string]any
	}{
		{"code=" + cards[1]["code"].(string), cards[1:2]},
		{"customer=" + cards[2]["holder_id"].(string), cards[2:]},
		{"ids=" + cards[0]["id"].(string) + "&ids=" + cards[2]["id"].(string), []map[string]any{cards[0], cards[2]}},
		{"created_at%5Bbefore%5D=2024-01-01T00:00:00Z", nil},
		{"created_at%5Bafter%5D=2024-01-01&updated_at%5Bafter%5D=2024-01-01T00:00:00Z", cards},
	} {
		got, _, total := ids(t, a.OK("GET", members+c.query, nil))
		var want []string
		for _, w := range c.want {
			want = append(want, w["id"].(string))
		}
		if !slices.Equal(got, want) || total != len(want) {
			t.Errorf("members?%s: %v (total %d), want %v", c.query, got, total, want)
		}
	}
	a.Fails("GET", members+"created_at%5Bbefore%5D=yesterday", nil, 400, "invalid_query_params")
	p := a.OK("POST", "/v1/products", map[string]any{"name": "P"})["id"].(string)
	for _, c := range []struct{ path, param string }{
		{"/v1/products?start_date=2024-01-01T00:00:00Z", "start_date"},
		{"/v1/products/" + p + "/skus?end_date=2024-01-01T00:00:00Z", "end_date"},
		{"/v1/campaigns?access_settings%5Bfilter%5D%5Bareas_ids%5D=a", "access_settings[filter][areas_ids]"},
	} {
		e := a.Fails("GET", c.path, nil, 400, "invalid_query_params")
		if d, _ := e["details"].(string); !strings.HasPrefix(d, c.param+":") {
			t.Errorf("%s: %v, want it to name %s", c.path, e, c.param)
		}
	}
	a.Fails("GET", "/v1/products/"+p+"/skus?order=code", nil, 400, "invalid_query_params")

	var as []string
	for i := range 2 {
		reward := a.OK("POST", "/v1/rewards", map[string]any{"name": fmt.Sprintf("R%d", i),
			"parameters": map[string]any{"product": map[string]any{"id": p}}})["id"].(string)
		as = append(as, a.OK("POST", "/v1/loyalties/"+program+"/rewards", []map[string]any{{"reward": reward,
			"parameters": map[string]any{"loyalty": map[string]any{"points": 10 + i}}}})["id"].(string))
	}
	got, more, total := ids(t, a.OK("GET", "/v1/loyalties/"+program+"/rewards?assignment_id="+as[1], nil))
	if !slices.Equal(got, as[1:]) || more || total != 1 {
		t.Fatalf("rewards by assignment_id: %v %v %d, want %v", got, more, total, as[1:])
	}
}
