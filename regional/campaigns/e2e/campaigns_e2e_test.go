package e2e_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Loyalty programs are campaigns: listed and read through /v1/campaigns,
// by id or name, and another project's is 404.
func TestLoyaltyProgramsAreReadAsCampaigns(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	other := stacktest.API{T: t, E: a.E, P: a.E.CreateProject(t, "api")}
	first := a.Campaign("First program", nil)
	second := a.Campaign("Second program", nil)
	l := a.OK("GET", "/v1/campaigns?order=-created_at", nil)
	cs := l["campaigns"].([]any)
	if l["object"] != "list" || l["data_ref"] != "campaigns" || l["total"] != 2.0 || len(cs) != 2 ||
		cs[0].(map[string]any)["id"] != second["id"] || cs[1].(map[string]any)["campaign_type"] != "LOYALTY_PROGRAM" {
		t.Fatalf("campaigns: %v", l)
	}
	if l := a.OK("GET", "/v1/campaigns?campaign_type=DISCOUNT_COUPONS", nil); l["total"] != 0.0 {
		t.Fatalf("discount campaigns: %v", l)
	}
	if l := a.OK("GET", "/v1/campaigns?campaign_type=LOYALTY_PROGRAM&limit=1", nil); l["total"] != 2.0 || len(l["campaigns"].([]any)) != 1 {
		t.Fatalf("loyalty programs: %v", l)
	}
	a.Fails("GET", "/v1/campaigns?campaign_type=COUPONS", nil, 400, "invalid_query_params")
	for _, key := range []string{first["id"].(string), "First%20program"} {
		if g := a.OK("GET", "/v1/campaigns/"+key, nil); g["id"] != first["id"] || g["name"] != "First program" {
			t.Fatalf("campaign %s: %v", key, g)
		}
	}
	other.Fails("GET", "/v1/campaigns/"+first["id"].(string), nil, 404, "not_found")
	if l := other.OK("GET", "/v1/campaigns", nil); l["total"] != 0.0 {
		t.Fatalf("another project's campaigns: %v", l)
	}
}

// categoriesOf is a campaign's categories array, checked to hold at most
// one category object, and that one's name and hierarchy.
func categoriesOf(t *testing.T, c map[string]any) (n int, name any, hierarchy any) {
	t.Helper()
	cs, ok := c["categories"].([]any)
	if !ok {
		t.Fatalf("no categories array: %v", c)
	}
	if len(cs) == 0 {
		return 0, nil, nil
	}
	cat := cs[0].(map[string]any)
	if cat["object"] != "category" || cat["id"] != c["category_id"] || cat["created_at"] == nil {
		t.Fatalf("category object: %v (campaign category_id %v)", cat, c["category_id"])
	}
	return len(cs), cat["name"], cat["hierarchy"]
}

// A campaign's categories array holds the category it names, as the
// category is now, on create, get, list and update, for every type.
func TestCampaignsCarryTheirCategoryObjects(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	snacks := a.OK("POST", "/v1/categories", map[string]any{"name": "Snacks", "hierarchy": 3})
	made := a.OK("POST", "/v1/campaigns", map[string]any{"name": "Crisps", "campaign_type": "DISCOUNT_COUPONS", "vouchers_count": 1,
		"category_id": snacks["id"], "voucher": map[string]any{"type": "DISCOUNT_VOUCHER",
			"discount": map[string]any{"type": "AMOUNT", "amount_off": 100}}})
	if n, name, h := categoriesOf(t, made); n != 1 || name != "Snacks" || h != 3.0 {
		t.Fatalf("created: %v", made["categories"])
	}
	// A loyalty program naming a category by name (made with it).
	prog := a.Campaign("Points", map[string]any{"category": "Loyal"})
	if n, name, _ := categoriesOf(t, prog); n != 1 || name != "Loyal" {
		t.Fatalf("loyalty program created: %v", prog["categories"])
	}
	plain := a.Campaign("Plain", nil)
	if n, _, _ := categoriesOf(t, plain); n != 0 {
		t.Fatalf("a campaign without a category: %v", plain["categories"])
	}
	// Read back, after the category changed: as it is now.
	a.OK("PUT", "/v1/categories/"+snacks["id"].(string), map[string]any{"name": "Savoury", "hierarchy": 7})
	got := a.OK("GET", "/v1/campaigns/"+made["id"].(string), nil)
	if n, name, h := categoriesOf(t, got); n != 1 || name != "Savoury" || h != 7.0 {
		t.Fatalf("get: %v", got["categories"])
	}
	byName := map[string]map[string]any{}
	for _, c := range a.OK("GET", "/v1/campaigns", nil)["campaigns"].([]any) {
		byName[c.(map[string]any)["name"].(string)] = c.(map[string]any)
	}
	if n, name, _ := categoriesOf(t, byName["Crisps"]); n != 1 || name != "Savoury" {
		t.Fatalf("list, Crisps: %v", byName["Crisps"]["categories"])
	}
	if n, name, _ := categoriesOf(t, byName["Points"]); n != 1 || name != "Loyal" {
		t.Fatalf("list, Points: %v", byName["Points"]["categories"])
	}
	if n, _, _ := categoriesOf(t, byName["Plain"]); n != 0 {
		t.Fatalf("list, Plain: %v", byName["Plain"]["categories"])
	}
	// Updated: to another category, then a change that leaves it.
	moved := a.OK("PUT", "/v1/campaigns/"+made["id"].(string), map[string]any{"category": "Sweets"})
	if n, name, _ := categoriesOf(t, moved); n != 1 || name != "Sweets" {
		t.Fatalf("moved: %v", moved["categories"])
	}
	kept := a.OK("PUT", "/v1/campaigns/"+made["id"].(string), map[string]any{"description": "crunchy"})
	if n, name, _ := categoriesOf(t, kept); n != 1 || name != "Sweets" {
		t.Fatalf("an update that leaves the category: %v", kept["categories"])
	}
	if g := a.OK("GET", "/v1/loyalties/"+prog["id"].(string), nil); g["categories"].([]any)[0].(map[string]any)["name"] != "Loyal" {
		t.Fatalf("the program through /v1/loyalties: %v", g["categories"])
	}
}
