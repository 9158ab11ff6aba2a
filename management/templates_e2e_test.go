package management_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// The management API lists a project's campaign templates, read from the
// project's cluster, by the same cursor as the application API's list.
func TestManagementListsCampaignTemplates(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	h := e.MgmtHeader()
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "us1")}
	a.OK("POST", "/v1/campaigns", map[string]any{"name": "Codes", "campaign_type": "DISCOUNT_COUPONS",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 7}}})
	first := a.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "One", "campaign_id": "Codes"})
	a.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Two", "campaign_id": "Codes"})
	url := base + "/projects/" + a.P.ID + "/templates/campaigns"
	r := e.Do(t, "GET", url+"?limit=1&include_total=true", h, nil)
	if r.Status != 200 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	l := r.JSON(t)
	data := l["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["id"] != first["id"] || l["has_more"] != true || stacktest.Num(l["total"]) != 2 {
		t.Fatalf("list: %s", r.Body)
	}
	if l := e.Do(t, "GET", url+"?starting_after_id="+first["id"].(string), h, nil).JSON(t); len(l["data"].([]any)) != 1 ||
		l["data"].([]any)[0].(map[string]any)["name"] != "Two" {
		t.Fatalf("second page: %v", l)
	}
	if r := e.Do(t, "GET", base+"/projects/proj_none/templates/campaigns", h, nil); r.Status != 404 {
		t.Fatalf("unknown project: %d %s", r.Status, r.Body)
	}
}
