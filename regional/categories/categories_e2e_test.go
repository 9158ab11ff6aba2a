package categories_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestCategoriesCreateReadUpdateDelete(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	c := a.OK("POST", "/v1/categories", map[string]any{"name": "Summer", "hierarchy": 2})
	id, _ := c["id"].(string)
	if !strings.HasPrefix(id, "cat_") || c["name"] != "Summer" || c["hierarchy"] != 2.0 || c["object"] != "category" || c["created_at"] == nil {
		t.Fatalf("created: %v", c)
	}
	a.OK("POST", "/v1/categories", map[string]any{"name": "Winter"}) // hierarchy 0
	if got := a.OK("GET", "/v1/categories/"+id, nil); got["name"] != "Summer" || got["hierarchy"] != 2.0 || got["updated_at"] != nil {
		t.Fatalf("read: %v", got)
	}
	l := a.OK("GET", "/v1/categories", nil)
	data := l["data"].([]any)
	if l["object"] != "list" || l["data_ref"] != "data" || l["total"] != 2.0 || data[0].(map[string]any)["name"] != "Winter" {
		t.Fatalf("list (by hierarchy): %v", l)
	}
	u := a.OK("PUT", "/v1/categories/"+id, map[string]any{"name": "Summer sale", "hierarchy": 0})
	if u["name"] != "Summer sale" || u["hierarchy"] != 0.0 || u["updated_at"] == nil || u["created_at"] != c["created_at"] {
		t.Fatalf("updated: %v", u)
	}
	if got := a.OK("GET", "/v1/categories/"+id, nil); got["name"] != "Summer sale" || got["updated_at"] != u["updated_at"] {
		t.Fatalf("read back: %v", got)
	}

	// Bad input names what is wrong.
	for _, b := range []map[string]any{{}, {"name": " "}, {"name": strings.Repeat("x", 201)}, {"name": "X", "hierarchy": -1},
		{"name": "X", "hierarchy": 1.5}, {"name": "X", "hierarchy": "1"}, {"name": 5}, {"name": "X", "hierarchy": 1 << 40}} {
		a.Fails("POST", "/v1/categories", b, http.StatusBadRequest, "invalid_payload")
	}
	a.Fails("POST", "/v1/categories", map[string]any{"name": "Winter"}, http.StatusConflict, "duplicate_found")
	a.Fails("PUT", "/v1/categories/"+id, map[string]any{"name": "Winter"}, http.StatusConflict, "duplicate_found")
	a.Fails("PUT", "/v1/categories/"+id, map[string]any{"hierarchy": -3}, http.StatusBadRequest, "invalid_payload")
	a.Fails("GET", "/v1/categories/cat_nope", nil, http.StatusNotFound, "not_found")

	// Another project's category is 404 every way.
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	other.Fails("GET", "/v1/categories/"+id, nil, http.StatusNotFound, "not_found")
	other.Fails("PUT", "/v1/categories/"+id, map[string]any{"name": "Mine"}, http.StatusNotFound, "not_found")
	other.Fails("DELETE", "/v1/categories/"+id, nil, http.StatusNotFound, "not_found")
	other.Fails("POST", "/v1/vouchers/O-1", map[string]any{"type": "DISCOUNT_VOUCHER", "category_id": id,
		"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}}, http.StatusNotFound, "not_found")
	if l := other.OK("GET", "/v1/categories", nil); l["total"] != 0.0 {
		t.Fatalf("the other project's list: %v", l)
	}
	other.OK("POST", "/v1/categories", map[string]any{"name": "Winter"}) // names are the project's own

	if r := a.Do("DELETE", "/v1/categories/"+id, nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	a.Fails("GET", "/v1/categories/"+id, nil, http.StatusNotFound, "not_found")
	a.Fails("DELETE", "/v1/categories/"+id, nil, http.StatusNotFound, "not_found")
}

// Vouchers and campaigns name their category by name (made when the
// project has none of that name) or by id; a voucher reads its category
// as it is now: renamed, or gone once deleted.
func TestVouchersAndCampaignsResolveTheirCategory(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	disc := map[string]any{"type": "AMOUNT", "amount_off": 100}
	cat := a.OK("POST", "/v1/categories", map[string]any{"name": "Food", "hierarchy": 3})
	catOf := func(v map[string]any) (any, any, []any) {
		return v["category"], v["category_id"], v["categories"].([]any)
	}

	// By id: the voucher shows the category whole.
	v := a.OK("POST", "/v1/vouchers/C-1", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": disc, "category_id": cat["id"]})
	if name, id, cs := catOf(v); name != "Food" || id != cat["id"] || len(cs) != 1 || cs[0].(map[string]any)["hierarchy"] != 3.0 ||
		cs[0].(map[string]any)["id"] != cat["id"] {
		t.Fatalf("by id: %v", v)
	}
	// By name: the existing one, or a new one.
	if _, id, _ := catOf(a.OK("POST", "/v1/vouchers/C-2", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": disc, "category": "Food"})); id != cat["id"] {
		t.Fatalf("by name: %v", id)
	}
	v3 := a.OK("POST", "/v1/vouchers/C-3", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": disc, "category": "Drinks"})
	_, drinks, _ := catOf(v3)
	if got := a.OK("GET", "/v1/categories/"+drinks.(string), nil); got["name"] != "Drinks" || got["hierarchy"] != 0.0 {
		t.Fatalf("made by name: %v", got)
	}
	// An update moves a voucher to another category.
	if name, id, _ := catOf(a.OK("PUT", "/v1/vouchers/C-2", map[string]any{"category_id": drinks})); name != "Drinks" || id != drinks {
		t.Fatalf("moved: %v %v", name, id)
	}
	if l := a.OK("GET", "/v1/vouchers?category=Drinks", nil); l["total"] != 2.0 {
		t.Fatalf("list by category: %v", l)
	}

	// Bad references: 404 for an unknown id, 400 for a blank name or two
	// names of different categories.
	a.Fails("POST", "/v1/vouchers/C-4", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": disc, "category_id": "cat_nope"},
		http.StatusNotFound, "not_found")
	a.Fails("POST", "/v1/vouchers/C-4", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": disc, "category": "  "},
		http.StatusBadRequest, "invalid_payload")
	a.Fails("POST", "/v1/vouchers/C-4", map[string]any{"type": "DISCOUNT_VOUCHER", "discount": disc, "category": "Food",
		"category_id": drinks}, http.StatusBadRequest, "invalid_payload")
	a.Fails("PUT", "/v1/vouchers/C-1", map[string]any{"category_id": "cat_nope"}, http.StatusNotFound, "not_found")
	a.Fails("GET", "/v1/vouchers/C-4", nil, http.StatusNotFound, "not_found") // nothing made

	// A campaign's category: resolved, and its vouchers take it.
	camp := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Lunch", "campaign_type": "DISCOUNT_COUPONS", "vouchers_count": 3,
		"category": "Food", "voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": disc}})
	if camp["category"] != "Food" || camp["category_id"] != cat["id"] {
		t.Fatalf("campaign: %v", camp)
	}
	a.WaitAction(camp["async_action_id"].(string))
	for _, x := range a.OK("GET", "/v1/vouchers?campaign_id="+camp["id"].(string), nil)["vouchers"].([]any) {
		if name, id, _ := catOf(x.(map[string]any)); name != "Food" || id != cat["id"] {
			t.Fatalf("generated voucher: %v", x)
		}
	}
	if u := a.OK("PUT", "/v1/campaigns/"+camp["id"].(string), map[string]any{"category_id": drinks}); u["category"] != "Drinks" || u["category_id"] != drinks {
		t.Fatalf("campaign moved: %v", u)
	}
	a.Fails("PUT", "/v1/campaigns/"+camp["id"].(string), map[string]any{"category_id": "cat_nope"}, http.StatusNotFound, "not_found")
	a.Fails("POST", "/v1/campaigns", map[string]any{"name": "Bad", "campaign_type": "DISCOUNT_COUPONS", "category_id": "cat_nope",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": disc}}, http.StatusNotFound, "not_found")
	a.Fails("GET", "/v1/campaigns/Bad", nil, http.StatusNotFound, "not_found")
	prog := a.OK("POST", "/v1/loyalties", map[string]any{"name": "Points", "category": "Food",
		"voucher": map[string]any{"type": "LOYALTY_CARD", "loyalty_card": map[string]any{"points": 0}}})
	if prog["category_id"] != cat["id"] {
		t.Fatalf("loyalty program: %v", prog)
	}

	// Renamed: vouchers read the new name, campaigns hold it.
	a.OK("PUT", "/v1/categories/"+drinks.(string), map[string]any{"name": "Beverages"})
	if name, _, cs := catOf(a.OK("GET", "/v1/vouchers/C-3", nil)); name != "Beverages" || cs[0].(map[string]any)["name"] != "Beverages" {
		t.Fatalf("renamed: %v", name)
	}
	if c := a.OK("GET", "/v1/campaigns/"+camp["id"].(string), nil); c["category"] != "Beverages" {
		t.Fatalf("campaign after the rename: %v", c)
	}
	// Deleted (204 whoever uses it, as the reference answers): the
	// vouchers and campaigns that had it have none.
	if r := a.Do("DELETE", "/v1/categories/"+drinks.(string), nil); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if name, id, cs := catOf(a.OK("GET", "/v1/vouchers/C-3", nil)); name != nil || id != nil || len(cs) != 0 {
		t.Fatalf("after the deletion: %v %v %v", name, id, cs)
	}
	if c := a.OK("GET", "/v1/campaigns/"+camp["id"].(string), nil); c["category"] != nil || c["category_id"] != nil {
		t.Fatalf("campaign after the deletion: %v", c)
	}
	if l := a.OK("GET", "/v1/vouchers?category=Beverages", nil); l["total"] != 0.0 {
		t.Fatalf("list by a deleted category: %v", l)
	}
	// Still usable: the campaign is updated, and its new vouchers have no category.
	a.OK("PUT", "/v1/campaigns/"+camp["id"].(string), map[string]any{"description": "d"})
	if name, _, _ := catOf(a.OK("POST", "/v1/vouchers/C-5", map[string]any{"campaign": "Lunch"})); name != nil {
		t.Fatalf("a new voucher of the campaign: %v", name)
	}
}
