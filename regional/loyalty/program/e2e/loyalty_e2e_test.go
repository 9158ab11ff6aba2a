package e2e_test

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// api is a project's client of one cluster, with the loyalty helpers.
type api struct{ stacktest.API }

func start(t *testing.T) (*stacktest.Env, api) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	return e, api{stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}}
}

func card(m map[string]any) map[string]any { return m["loyalty_card"].(map[string]any) }

func num(v any) int64 { return int64(v.(float64)) }

func TestCampaignMembersBalanceAndTransfersLeaveTheExactTransactions(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	camp := a.Campaign("Gold Club", map[string]any{"metadata": map[string]any{"tier": "gold"}})
	campID := camp["id"].(string)
	if !strings.HasPrefix(campID, "camp_") || camp["campaign_type"] != "LOYALTY_PROGRAM" || camp["object"] != "campaign" ||
		camp["vouchers_count"] != 1.0 || camp["vouchers_generation_status"] != "DONE" {
		t.Fatalf("campaign: %v", camp)
	}
	if got := a.OK("GET", "/v1/loyalties/Gold%20Club", nil); got["id"] != campID {
		t.Fatalf("by name: %v", got)
	}
	a.Fails("POST", "/v1/loyalties", map[string]any{"name": "Gold Club"}, 409, "duplicate_found")
	a.Fails("POST", "/v1/loyalties", map[string]any{"vouchers_count": 2}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties", map[string]any{"name": "bad\x00name"}, 400, "invalid_payload")
	if l := a.OK("GET", "/v1/loyalties", nil); l["total"] != 1.0 || len(l["campaigns"].([]any)) != 1 || l["data_ref"] != "campaigns" {
		t.Fatalf("list: %v", l)
	}
	upd := a.OK("PUT", "/v1/loyalties/"+campID, map[string]any{"description": "the best"})
	if upd["description"] != "the best" || upd["metadata"].(map[string]any)["tier"] != "gold" {
		t.Fatalf("update: %v", upd)
	}

	// The campaign's one card goes to the first member; the second gets a new one.
	ann := a.Member(campID, "ann")
	code := ann["code"].(string)
	if !regexp.MustCompile(`^LC-[A-HJ-NP-Z2-9]{6}$`).MatchString(code) || ann["type"] != "LOYALTY_CARD" || ann["holder_id"] == nil {
		t.Fatalf("card: %v", ann)
	}
	if again := a.Member(campID, "ann"); again["code"] != code {
		t.Fatalf("a program is joined once: %v then %v", code, again["code"])
	}
	bob := a.Member(campID, "bob")
	bobCode := bob["code"].(string)
	if bobCode == code {
		t.Fatal("two members, one card")
	}

	exp := time.Now().AddDate(0, 2, 0).Format(time.DateOnly)
	bal := a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 100, "reason": "welcome",
		"source_id": "crm-1", "expiration_type": "CUSTOM_DATE", "expiration_date": exp})
	if bal["points"] != 100.0 || bal["balance"] != 100.0 || bal["total"] != 100.0 || bal["object"] != "balance" ||
		bal["type"] != "loyalty_card" || bal["related_object"].(map[string]any)["id"] != ann["id"] {
		t.Fatalf("balance: %v", bal)
	}
	a.OK("POST", "/v1/loyalties/"+campID+"/members/"+code+"/balance", map[string]any{"points": 50, "expiration_type": "NON_EXPIRING"})
	rm := a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": -30, "reason": "correction"})
	if rm["points"] != -30.0 || rm["balance"] != 120.0 {
		t.Fatalf("removal: %v", rm)
	}
	a.Fails("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": -121}, 400, "loyalty_card_points_exceeded")
	a.Fails("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 0}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": "many"}, 400, "invalid_payload")
	a.Fails("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 5, "expiration_type": "CUSTOM_DATE"}, 400, "invalid_payload")

	got := a.OK("GET", "/v1/loyalties/members/"+code, nil)
	lc := card(got)
	// 100 expiring on exp, 50 never; the removal took from the soonest-expiring.
	if lc["points"] != 150.0 || lc["balance"] != 120.0 || lc["subtracted_points"] != 30.0 || lc["expired_points"] != 0.0 ||
		lc["pending_points"] != 0.0 || lc["next_expiration_date"] != exp || lc["next_expiration_points"] != 70.0 {
		t.Fatalf("figures: %v", lc)
	}

	tr := a.OK("POST", "/v1/loyalties/"+campID+"/members/"+bobCode+"/transfers", []map[string]any{
		{"code": code, "points": 20, "reason": "gift", "source_id": "tr-1"}})
	if card(tr)["balance"] != 20.0 || tr["code"] != bobCode {
		t.Fatalf("transfer answer: %v", tr)
	}
	a.Fails("POST", "/v1/loyalties/"+campID+"/members/"+bobCode+"/transfers", []map[string]any{{"code": code, "points": 101}},
		400, "loyalty_card_points_exceeded")
	a.Fails("POST", "/v1/loyalties/"+campID+"/members/"+bobCode+"/transfers", []map[string]any{{"code": bobCode, "points": 1}},
		400, "invalid_payload")

	txs := a.OK("GET", "/v1/loyalties/members/"+code+"/transactions?order=id", nil)
	data := txs["data"].([]any)
	if txs["object"] != "list" || txs["data_ref"] != "data" || txs["has_more"] != false || len(data) != 4 {
		t.Fatalf("history: %v", txs)
	}
	add, add2, removal, out := data[0].(map[string]any), data[1].(map[string]any), data[2].(map[string]any), data[3].(map[string]any)
	stacktest.CheckTx(t, add, "POINTS_ADDITION", "balance")
	stacktest.CheckTx(t, add2, "POINTS_ADDITION", "balance")
	stacktest.CheckTx(t, removal, "POINTS_REMOVAL", "balance")
	stacktest.CheckTx(t, out, "POINTS_TRANSFER_OUT", "balance", "destination_voucher")
	if add["source_id"] != "crm-1" || add["reason"] != "welcome" || add["source"] != "API" || add["voucher_id"] != ann["id"] ||
		add["campaign_id"] != campID || add["related_transaction_id"] != nil || add2["reason"] != nil || add2["source_id"] != nil {
		t.Fatalf("addition: %v / %v", add, add2)
	}
	if b := removal["details"].(map[string]any)["balance"].(map[string]any); b["points"] != -30.0 || b["balance"] != 120.0 {
		t.Fatalf("removal balance: %v", b)
	}
	if dv := out["details"].(map[string]any)["destination_voucher"].(map[string]any); dv["code"] != bobCode ||
		dv["type"] != "LOYALTY_CARD" || dv["object"] != "voucher" || dv["created_at"] == nil {
		t.Fatalf("destination_voucher: %v", dv)
	}
	in := a.OK("GET", "/v1/loyalties/"+campID+"/members/"+bobCode+"/transactions", nil)["data"].([]any)[0].(map[string]any)
	stacktest.CheckTx(t, in, "POINTS_TRANSFER_IN", "balance", "source_voucher")
	if in["related_transaction_id"] != out["id"] || out["related_transaction_id"] != in["id"] || in["reason"] != "gift" {
		t.Fatalf("transfer links: out %v in %v", out, in)
	}
	if sv := in["details"].(map[string]any)["source_voucher"].(map[string]any); sv["code"] != code {
		t.Fatalf("source_voucher: %v", sv)
	}

	// The campaign-scoped and member-scoped paths agree; the campaign's list holds both cards' entries.
	scoped := a.OK("GET", "/v1/loyalties/"+campID+"/members/"+code+"/transactions?order=id", nil)
	if fmt.Sprint(scoped["data"]) != fmt.Sprint(txs["data"]) {
		t.Fatal("campaign-scoped and member-scoped histories differ")
	}
	all := a.OK("GET", "/v1/loyalties/"+campID+"/transactions?limit=100", nil)["data"].([]any)
	if len(all) != 5 {
		t.Fatalf("campaign history: %d entries", len(all))
	}
	if l := a.OK("GET", "/v1/loyalties/"+campID+"/members", nil); l["total"] != 2.0 || l["data_ref"] != "vouchers" {
		t.Fatalf("members: %v", l)
	}

	// Another campaign's path does not reach this card.
	other := a.Campaign("Silver", nil)["id"].(string)
	a.Fails("GET", "/v1/loyalties/"+other+"/members/"+code, nil, 404, "not_found")
	a.Fails("GET", "/v1/loyalties/"+other+"/members/"+code+"/transactions", nil, 404, "not_found")

	// Deleting the campaign: an async action; the campaign and its cards are gone at once.
	del := a.OK("DELETE", "/v1/loyalties/"+campID, nil)
	if !strings.HasPrefix(del["async_action_id"].(string), "aa_") {
		t.Fatalf("delete: %v", del)
	}
	a.Fails("GET", "/v1/loyalties/"+campID, nil, 404, "not_found")
	a.Fails("GET", "/v1/loyalties/members/"+code, nil, 404, "not_found")
	a.WaitAction(del["async_action_id"].(string))
	a.Campaign("Gold Club", nil) // the name is free again
}

func TestManyCardsAreGeneratedByAnAsyncAction(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	camp := a.OK("POST", "/v1/loyalties", map[string]any{"name": "Big", "vouchers_count": 3000, "type": "STATIC",
		"voucher": map[string]any{"loyalty_card": map[string]any{"points": 10},
			"code_config": map[string]any{"pattern": "BIG-####-##", "charset": "0123456789"}}})
	if camp["vouchers_generation_status"] != "IN_PROGRESS" || camp["async_action_id"] == nil {
		t.Fatalf("campaign: %v", camp)
	}
	act := a.WaitAction(camp["async_action_id"].(string))
	if act["type"] != "CAMPAIGN.VOUCHERS_GENERATE" || act["progress"] != 100.0 {
		t.Fatalf("action: %v", act)
	}
	if got := a.OK("GET", "/v1/loyalties/"+camp["id"].(string), nil); got["vouchers_generation_status"] != "DONE" {
		t.Fatalf("after: %v", got)
	}
	seen := map[string]bool{}
	after := ""
	for {
		l := a.OK("GET", "/v1/loyalties/"+camp["id"].(string)+"/members?limit=100&starting_after_id="+after, nil)
		if l["total"] != 3000.0 {
			t.Fatalf("total %v", l["total"])
		}
		for _, v := range l["vouchers"].([]any) {
			c := v.(map[string]any)
			if !regexp.MustCompile(`^BIG-\d{4}-\d{2}$`).MatchString(c["code"].(string)) || seen[c["code"].(string)] ||
				card(c)["balance"] != 10.0 {
				t.Fatalf("card %v", c)
			}
			seen[c["code"].(string)] = true
		}
		if l["has_more"] != true {
			break
		}
		after = l["more_starting_after"].(string)
	}
	if len(seen) != 3000 {
		t.Fatalf("%d cards", len(seen))
	}
	// Starting points are ledger entries too.
	var code string
	for c := range seen {
		code = c
		break
	}
	txs := a.OK("GET", "/v1/loyalties/members/"+code+"/transactions", nil)["data"].([]any)
	if len(txs) != 1 {
		t.Fatalf("initial points: %v", txs)
	}
	stacktest.CheckTx(t, txs[0].(map[string]any), "POINTS_ADDITION", "balance")
	// A STATIC campaign with every card taken refuses new members only when none is free.
	a.Member(camp["id"].(string), "first")
	a.Fails("POST", "/v1/loyalties", map[string]any{"name": "Tiny", "vouchers_count": 11,
		"voucher": map[string]any{"code_config": map[string]any{"length": 1, "charset": "AB"}}}, 400, "invalid_payload")
}

func TestHistoryPagesFiltersAndOrders(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	campID := a.Campaign("Paging", nil)["id"].(string)
	code := a.Member(campID, "pat")["code"].(string)
	for i := 0; i < 250; i++ {
		a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": i + 1, "source_id": fmt.Sprintf("s%03d", i)})
	}
	path := "/v1/loyalties/members/" + code + "/transactions"
	collect := func(order string) []string {
		var ids []string
		after := ""
		for pages := 0; ; pages++ {
			q := url.Values{"limit": {"100"}, "order": {order}}
			if after != "" {
				q.Set("starting_after_id", after)
			}
			l := a.OK("GET", path+"?"+q.Encode(), nil)
			for _, v := range l["data"].([]any) {
				ids = append(ids, v.(map[string]any)["id"].(string))
			}
			if l["has_more"] != true {
				if _, present := l["more_starting_after"]; !present || pages != 2 {
					t.Fatalf("last page: %v after %d pages", l["more_starting_after"], pages)
				}
				return ids
			}
			after = l["more_starting_after"].(string)
		}
	}
	asc, desc := collect("id"), collect("-id")
	if len(asc) != 250 || len(desc) != 250 || !sort.StringsAreSorted(asc) {
		t.Fatalf("%d ascending, %d descending", len(asc), len(desc))
	}
	for i := range asc {
		if asc[i] != desc[249-i] {
			t.Fatal("descending is not ascending reversed")
		}
	}
	def := a.OK("GET", path, nil)["data"].([]any)
	if len(def) != 10 || def[0].(map[string]any)["id"] != asc[0] {
		t.Fatalf("default: %d entries", len(def))
	}

	all := a.OK("GET", path+"?limit=100&order=id", nil)["data"].([]any)
	mid := all[50].(map[string]any)
	midAt, _ := time.Parse(time.RFC3339Nano, mid["created_at"].(string))
	count := func(q string) int {
		t.Helper()
		return len(a.OK("GET", path+"?limit=100&"+q, nil)["data"].([]any))
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for q, want := range map[string]int{
		"filters[created_at][conditions][$after]=" + past:                                          100,
		"filters[created_at][conditions][$after][0]=" + future:                                     0,
		"filters%5Bcreated_at%5D%5Bconditions%5D%5B%24before%5D=" + url.QueryEscape(future):        100,
		"filters[created_at][conditions][$before]=" + past:                                         0,
		"filters[created_at][conditions][$has_value]=":                                             100,
		"filters[created_at][conditions][$is_unknown]=":                                            0,
		"filters[created_at][conditions][$less_than]=1":                                            100,
		"filters[created_at][conditions][$more_than]=1":                                            0,
		"filters[id][conditions][$is]=" + mid["id"].(string):                                       1,
		"filters[id][conditions][$is_not]=" + mid["id"].(string):                                   100,
		"filters[id][conditions][$in][0]=" + asc[0] + "&filters[id][conditions][$in][1]=" + asc[1]: 2,
		"filters[id][conditions][$not_in][0]=" + asc[0] + "&order=id":                              100,
		"filters[id][conditions][$starts_with]=vtx_":                                               100,
		"filters[id][conditions][$starts_with]=zz":                                                 0,
		"filters[id][conditions][$ends_with]=" + asc[7][len(asc[7])-8:]:                            1,
		// All of the id from its 7th character: ids made in one millisecond share
		// their leading digits, so a shorter middle piece matched two (flaky).
		"filters[id][conditions][$contains]=" + asc[9][6:]:    1,
		"filters[id][conditions][$not_contain]=" + asc[9][6:]: 100,
		"filters[id][conditions][$has_value]=":                100,
		"filters[id][conditions][$is_unknown]=":               0,
		"filters[junction]=or&filters[id][conditions][$is]=" + asc[0] + "&filters[id][conditions][$ends_with]=" + asc[1][len(asc[1])-8:]:  2,
		"filters[junction]=and&filters[id][conditions][$is]=" + asc[0] + "&filters[id][conditions][$ends_with]=" + asc[1][len(asc[1])-8:]: 0,
	} {
		if got := count(q); got != want {
			t.Errorf("%s: %d, want %d", q, got, want)
		}
	}
	if got := a.OK("GET", path+"?filters[created_at][conditions][$after]="+url.QueryEscape(midAt.Add(-time.Millisecond).Format(time.RFC3339Nano))+"&limit=100", nil)["data"].([]any); len(got) == 0 {
		t.Error("$after a mid-history time found nothing")
	}
	for q, param := range map[string]string{
		"limit=0": "limit", "limit=101": "limit", "limit=x": "limit", "order=created_at": "order",
		"filters[amount][conditions][$is]=1": "filters[amount]", "filters[created_at][conditions][$after]=soon": "filters[created_at]",
		"filters[id][conditions][$gt]=a": "filters[id]", "filters[junction]=nor": "filters[junction]",
	} {
		m := a.Fails("GET", path+"?"+q, nil, 400, "invalid_query_params")
		if !strings.Contains(m["details"].(string), param) {
			t.Errorf("%s: details %q do not name %s", q, m["details"], param)
		}
	}
}

func TestCardsOfOtherProjectsAndClustersAreUnreachable(t *testing.T) {
	t.Parallel()
	e, a := start(t)
	campID := a.Campaign("Mine", nil)["id"].(string)
	code := a.Member(campID, "me")["code"].(string)
	other := api{stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}}
	other.Fails("GET", "/v1/loyalties/members/"+code, nil, 404, "not_found")
	other.Fails("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 5}, 404, "not_found")
	other.Fails("GET", "/v1/loyalties/members/"+code+"/transactions", nil, 404, "not_found")
	other.Fails("GET", "/v1/loyalties/"+campID, nil, 404, "not_found")
	us := api{stacktest.API{T: t, E: e, P: e.CreateProject(t, "us1")}}
	usCode := us.Member(us.Campaign("US", nil)["id"].(string), "yank")["code"].(string)
	// The us1 project's key on the Europe host is the wrong cluster; Europe's key finds no such card.
	r := e.Do(t, "GET", stacktest.URL("api", "/v1/loyalties/members/"+usCode), us.P.Header(), nil)
	if r.Status != 421 {
		t.Fatalf("us1 card on api: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/loyalties/members/"+usCode, nil, 404, "not_found")
}

// A card's code is taken among every voucher type's codes while the card
// lives, and free again once its program is deleted for good.
func TestCardCodesAreHeldUntilTheirProgramIsDeleted(t *testing.T) {
	t.Parallel()
	_, a := start(t)
	camp := a.OK("POST", "/v1/loyalties", map[string]any{"name": "Short", "vouchers_count": 3, "type": "STATIC",
		"voucher": map[string]any{"code_config": map[string]any{"pattern": "SH-####", "charset": "0123456789"}}})
	id := camp["id"].(string)
	if act, ok := camp["async_action_id"].(string); ok {
		a.WaitAction(act)
	}
	var codes []string
	for _, v := range a.OK("GET", "/v1/loyalties/"+id+"/members", nil)["vouchers"].([]any) {
		codes = append(codes, v.(map[string]any)["code"].(string))
	}
	if len(codes) != 3 {
		t.Fatalf("cards: %v", codes)
	}
	voucher := map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 1}}
	for _, c := range codes {
		a.Fails("POST", "/v1/vouchers/"+c, voucher, 409, "duplicate_found")
	}
	r := a.Do("DELETE", "/v1/campaigns/"+id+"?force=true", nil)
	if r.Status != 202 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.WaitAction(r.JSON(t)["async_action_id"].(string))
	for _, c := range codes {
		a.OK("POST", "/v1/vouchers/"+c, voucher)
	}
}
