package management_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// The management API lists a project's campaign templates, read from the
// project's cluster, by the same cursor as the application API's list.
func TestManagementListsCampaignTemplates(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
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

// A template copied to a project of another cluster equals its source but
// for its id, name and dates; a campaign made from the copy there equals
// one made from the source, its validation rule copy included; and the
// copy's refusals: unknown projects and templates, a bad body, a name the
// destination has, and a project user whose role in the destination does
// not write there.
func TestManagementCopiesATemplateIntoAnotherClustersProject(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	h := e.MgmtHeader()
	src := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	dst := stacktest.API{T: t, E: e, P: e.CreateProject(t, "us1")}
	rule := src.OK("POST", "/v1/validation-rules", map[string]any{"name": "big orders", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{5000}}}, "logic": "1"}})
	camp := src.OK("POST", "/v1/campaigns", map[string]any{"name": "Winter", "campaign_type": "DISCOUNT_COUPONS", "type": "STATIC",
		"metadata": map[string]any{"season": "winter"}, "validity_day_of_week": []any{5, 6},
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 500},
			"code_config": map[string]any{"prefix": "WIN-", "length": 5}}})
	src.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "campaign",
		"related_object_id": camp["id"]})
	tpl := src.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Winter template", "description": "cold", "campaign_id": "Winter"})
	copyURL := base + "/projects/" + src.P.ID + "/templates/campaigns/" + tpl["id"].(string) + "/copy"

	r := e.Do(t, "POST", copyURL, h, map[string]any{"name": "Imported winter", "destination_project_id": dst.P.ID})
	if r.Status != 200 {
		t.Fatalf("copy: %d %s", r.Status, r.Body)
	}
	cp := r.JSON(t)
	if cp["id"] == tpl["id"] || cp["name"] != "Imported winter" || cp["description"] != "cold" || cp["campaign_type"] != "DISCOUNT_COUPONS" ||
		cp["object"] != "campaign_template" || cp["created_at"] == nil {
		t.Fatalf("the copy: %v", cp)
	}
	if g := dst.OK("GET", "/v1/templates/campaigns/"+cp["id"].(string), nil); g["name"] != "Imported winter" {
		t.Fatalf("the copy in its project: %v", g)
	}
	src.Fails("GET", "/v1/templates/campaigns/"+cp["id"].(string), nil, 404, "not_found")

	// A campaign made from each equals the other but for ids, names and dates.
	made := func(a stacktest.API, tplID, name string) (map[string]any, map[string]any) {
		s := a.OK("POST", "/v1/templates/campaigns/"+tplID+"/campaign-setup", map[string]any{"name": name})
		res := s["created_resources"].([]any)
		if len(res) != 1 || res[0].(map[string]any)["object"] != "validation_rules" {
			t.Fatalf("%s: created %v", name, res)
		}
		return s["campaign"].(map[string]any), a.OK("GET", "/v1/validation-rules/"+res[0].(map[string]any)["id"].(string), nil)
	}
	here, hereRule := made(src, tpl["id"].(string), "Winter again")
	there, thereRule := made(dst, cp["id"].(string), "Winter abroad")
	for _, k := range []string{"campaign_type", "type", "metadata", "validity_day_of_week", "voucher", "description"} {
		hj, _ := json.Marshal(here[k])
		tj, _ := json.Marshal(there[k])
		if string(hj) != string(tj) {
			t.Errorf("campaign %s: %s there, %s here", k, tj, hj)
		}
	}
	hr, _ := json.Marshal(hereRule["rules"])
	tr, _ := json.Marshal(thereRule["rules"])
	if string(hr) != string(tr) || thereRule["name"] != "big orders (Winter abroad)" {
		t.Fatalf("the rule copy there: %v, here %v", thereRule, hereRule)
	}
	// The campaign made there works there: a code of it validates for a
	// big order and not for a small one.
	code := dst.OK("POST", "/v1/campaigns/"+there["id"].(string)+"/vouchers", map[string]any{})["code"].(string)
	ok := func(amount int) bool {
		v := dst.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code}},
			"order": map[string]any{"amount": amount}})
		return v["valid"] == true
	}
	if !ok(9000) || ok(1000) {
		t.Fatalf("the code of the campaign made from the copy: valid for 9000 %v, for 1000 %v", ok(9000), ok(1000))
	}

	want := func(r stacktest.Resp, status int, what string) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, status)
		}
	}
	want(e.Do(t, "POST", copyURL, h, map[string]any{"name": "Imported winter", "destination_project_id": dst.P.ID}), 409, "a name the destination has")
	want(e.Do(t, "POST", copyURL, h, map[string]any{"name": "Winter template", "destination_project_id": src.P.ID}), 409, "the source's own name")
	want(e.Do(t, "POST", copyURL, h, map[string]any{"name": "Winter twice", "destination_project_id": src.P.ID}), 200, "a copy in its own project")
	want(e.Do(t, "POST", copyURL, h, map[string]any{"destination_project_id": dst.P.ID}), 400, "no name")
	want(e.Do(t, "POST", copyURL, h, map[string]any{"name": "x"}), 400, "no destination")
	want(e.Do(t, "POST", copyURL, h, []any{}), 400, "not an object")
	want(e.Do(t, "POST", copyURL, h, map[string]any{"name": "x", "destination_project_id": "proj_none"}), 404, "an unknown destination")
	want(e.Do(t, "POST", base+"/projects/proj_none/templates/campaigns/"+tpl["id"].(string)+"/copy", h,
		map[string]any{"name": "x", "destination_project_id": dst.P.ID}), 404, "an unknown source project")
	want(e.Do(t, "POST", base+"/projects/"+src.P.ID+"/templates/campaigns/camp_tpl_none/copy", h,
		map[string]any{"name": "x", "destination_project_id": dst.P.ID}), 404, "an unknown template")
	want(e.Do(t, "POST", base+"/projects/"+dst.P.ID+"/templates/campaigns/"+tpl["id"].(string)+"/copy", h,
		map[string]any{"name": "x", "destination_project_id": src.P.ID}), 404, "another project's template")

	// A template whose rule names a static segment of its project is
	// refused into another project, naming it: its members are customers,
	// which a copy does not carry; within its project it is copied.
	seg := src.OK("POST", "/v1/segments", map[string]any{"name": "vips", "type": "static", "customers": []any{}})["id"].(string)
	segRule := src.OK("POST", "/v1/validation-rules", map[string]any{"name": "vips only", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "customer.segment", "conditions": map[string]any{"$is": []any{seg}}}, "logic": "1"}})
	vc := src.OK("POST", "/v1/campaigns", map[string]any{"name": "Vip", "campaign_type": "DISCOUNT_COUPONS", "type": "STATIC",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
			"code_config": map[string]any{"prefix": "VIP-", "length": 5}}})
	src.OK("POST", "/v1/validation-rules/"+segRule["id"].(string)+"/assignments", map[string]any{"related_object_type": "campaign",
		"related_object_id": vc["id"]})
	vip := src.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Vip template", "campaign_id": "Vip"})
	vipURL := base + "/projects/" + src.P.ID + "/templates/campaigns/" + vip["id"].(string) + "/copy"
	rv := e.Do(t, "POST", vipURL, h, map[string]any{"name": "Vip there", "destination_project_id": dst.P.ID})
	want(rv, 400, "a rule naming a static segment")
	if !strings.Contains(string(rv.Body), seg) {
		t.Fatalf("the refusal does not name the segment: %s", rv.Body)
	}
	want(e.Do(t, "POST", vipURL, h, map[string]any{"name": "Vip here", "destination_project_id": src.P.ID}), 200, "the same within its project")

	// A project user who is ADMIN in the source copies only into a project
	// where they are ADMIN too.
	want(e.Do(t, "POST", base+"/projects/users/invite", h, map[string]any{"email": "cat@example.com",
		"projects": map[string]any{src.P.ID: "ADMIN", dst.P.ID: "VIEWER"}}), 204, "invite")
	l := e.Do(t, "GET", base+"/projects/"+src.P.ID+"/users", h, nil).JSON(t)["data"].([]any)
	uid := l[0].(map[string]any)["id"].(string)
	cr := e.Do(t, "POST", base+"/users/"+uid+"/credentials", h, nil).JSON(t)
	uh := http.Header{"X-Management-Id": {cr["management_id"].(string)}, "X-Management-Token": {cr["management_token"].(string)}}
	want(e.Do(t, "POST", copyURL, uh, map[string]any{"name": "By cat", "destination_project_id": dst.P.ID}), 403, "into a project cat views")
	want(e.Do(t, "PUT", base+"/projects/"+dst.P.ID+"/users/"+uid, h, map[string]any{"role": "ADMIN"}), 200, "cat made ADMIN there")
	want(e.Do(t, "POST", copyURL, uh, map[string]any{"name": "By cat", "destination_project_id": dst.P.ID}), 200, "into a project cat runs")
}
