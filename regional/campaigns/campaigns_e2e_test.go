package campaigns_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Loyalty programs are campaigns: listed and read through /v1/campaigns,
// by id or name, and another project's is 404.
func TestLoyaltyProgramsAreReadAsCampaigns(t *testing.T) {
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
