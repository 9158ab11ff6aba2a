package e2e_test

import (
	"slices"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

const mgmt = "http://api.localhost/management/v1"

// carrying is a project whose template's rule names a location, a product,
// an AUTO_UPDATE collection and an auto-update segment of its project, and
// another project of the same cluster the template is copied to: the copy
// carries the four objects.
type carrying struct {
	src, dst stacktest.API
	copyID   string // the copy's id in dst
	ruleName string
}

// carriedObjects are the lists of the objects a copy carries, by kind as
// created_resources names it.
var carriedObjects = map[string]string{"location": "/v1/locations", "product": "/v1/products",
	"products_collection": "/v1/product-collections", "segments": "/v1/segments"}

func startCarrying(t *testing.T, fromTier bool) carrying {
	t.Helper()
	e := stacktest.Start(t, stacktest.Options{})
	c := carrying{src: stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}, dst: stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")},
		ruleName: "red hats for Berliners"}
	src := c.src
	rule, _ := src.CarriedRule(c.ruleName)
	tplBody := map[string]any{"name": "Hats"}
	if fromTier {
		p := src.OK("POST", "/v1/campaigns", map[string]any{"name": "Hats", "campaign_type": "PROMOTION", "promotion": map[string]any{
			"tiers": []any{map[string]any{"name": "Hats", "validation_rules": []any{rule["id"]},
				"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 500}}}}}})
		tplBody["promotion_tier_id"] = p["promotion"].(map[string]any)["tiers"].([]any)[0].(map[string]any)["id"]
	} else {
		camp := src.OK("POST", "/v1/campaigns", map[string]any{"name": "Hats", "campaign_type": "DISCOUNT_COUPONS", "type": "STATIC",
			"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 500}}})
		src.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "campaign",
			"related_object_id": camp["id"]})
		tplBody["campaign_id"] = camp["id"]
	}
	tpl := src.OK("POST", "/v1/templates/campaigns", tplBody)
	r := e.Do(t, "POST", mgmt+"/projects/"+src.P.ID+"/templates/campaigns/"+tpl["id"].(string)+"/copy", e.MgmtHeader(),
		map[string]any{"name": "Hats abroad", "destination_project_id": c.dst.P.ID})
	if r.Status != 200 {
		t.Fatalf("copy: %d %s", r.Status, r.Body)
	}
	c.copyID = r.JSON(t)["id"].(string)
	return c
}

// noneCarried fails t when the destination has any object of the kinds a
// copy carries.
func (c carrying) noneCarried(t *testing.T, after string) {
	t.Helper()
	for kind, path := range carriedObjects {
		l := c.dst.OK("GET", path, nil)
		if items, _ := l[l["data_ref"].(string)].([]any); len(items) != 0 {
			t.Errorf("after %s the destination has the %s %v", after, kind, items)
		}
	}
}

// madeOnce checks that a setup's created_resources hold one of each
// carried kind and its rule copy, each readable in the destination, and
// that the destination holds no other.
func (c carrying) madeOnce(t *testing.T, setup map[string]any) {
	t.Helper()
	made := map[string]string{}
	var kinds []string
	for _, x := range setup["created_resources"].([]any) {
		r := x.(map[string]any)
		made[r["object"].(string)] = r["id"].(string)
		kinds = append(kinds, r["object"].(string))
	}
	slices.Sort(kinds)
	if want := []string{"location", "product", "products_collection", "segments", "validation_rules"}; !slices.Equal(kinds, want) {
		t.Fatalf("created_resources: %v, want one each of %v", setup["created_resources"], want)
	}
	for kind, path := range carriedObjects {
		c.dst.OK("GET", path+"/"+made[kind], nil)
		l := c.dst.OK("GET", path, nil)
		if items := l[l["data_ref"].(string)].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != made[kind] {
			t.Errorf("the destination's %s: %v, want the one made, %s", kind, items, made[kind])
		}
	}
	if p := c.dst.OK("GET", "/v1/products/hat", nil); p["id"] != made["product"] {
		t.Errorf("the product made there: %v, want %s", p, made["product"])
	}
}

// A campaign-setup from a copied template that is refused leaves nothing
// of what the copy carries in the destination: the objects are made in the
// setup's transaction, and a refusal met after they were made there (the
// rule copy's name taken) undoes them with the campaign. A setup then
// made makes each once.
func TestARefusedCampaignSetupLeavesNothingACopyCarries(t *testing.T) {
	t.Parallel()
	c := startCarrying(t, false)
	dst := c.dst
	setupURL := "/v1/templates/campaigns/" + c.copyID + "/campaign-setup"

	// The campaign's name is taken: refused before anything is written.
	dst.OK("POST", "/v1/campaigns", map[string]any{"name": "Taken", "campaign_type": "DISCOUNT_COUPONS",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 5}}})
	dst.Fails("POST", setupURL, map[string]any{"name": "Taken"}, 409, "duplicate_found")
	c.noneCarried(t, "a setup refused for its campaign's name")

	// The rule copy's name is taken: refused in the transaction, after the
	// carried objects were made in it.
	dst.OK("POST", "/v1/validation-rules", map[string]any{"name": c.ruleName + " (Hats here)", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.amount", "conditions": map[string]any{"$more_than": []any{1}}}, "logic": "1"}})
	dst.Fails("POST", setupURL, map[string]any{"name": "Hats here"}, 409, "duplicate_found")
	c.noneCarried(t, "a setup refused for its rule copy's name")
	dst.Fails("GET", "/v1/campaigns/Hats here", nil, 404, "not_found")

	c.madeOnce(t, dst.OK("POST", setupURL, map[string]any{"name": "Hats there"}))
}

// A tier-setup from a copied template makes what the copy carries in the
// tier's transaction: refused (an unknown campaign, a tier the campaign
// does not take), it leaves none of it; made, it makes each once and the
// tier validates an order of the product made there only.
func TestATierSetupMakesWhatACopyCarriesWithTheTierOrNotAtAll(t *testing.T) {
	t.Parallel()
	c := startCarrying(t, true)
	dst := c.dst
	setupURL := "/v1/templates/campaigns/" + c.copyID + "/tier-setup"
	dst.OK("POST", "/v1/campaigns", map[string]any{"name": "Winter", "campaign_type": "PROMOTION", "promotion": map[string]any{
		"tiers": []any{map[string]any{"name": "first", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}}}}}})

	dst.Fails("POST", setupURL, map[string]any{"name": "Hats here", "campaign_id": "camp_none"}, 404, "not_found")
	c.noneCarried(t, "a tier-setup into no campaign")
	dst.Fails("POST", setupURL, map[string]any{"name": "Hats here", "campaign_id": "Winter", "hierarchy": -1}, 400, "invalid_payload")
	c.noneCarried(t, "a tier-setup whose tier is refused")

	s := dst.OK("POST", setupURL, map[string]any{"name": "Hats here", "campaign_id": "Winter"})
	c.madeOnce(t, s)
	if s["object"] != "promotion_tier_setup" || s["promotion_tier"].(map[string]any)["name"] != "Hats here" {
		t.Fatalf("setup: %v", s)
	}
	var product string
	for _, x := range s["created_resources"].([]any) {
		if r := x.(map[string]any); r["object"] == "product" {
			product = r["id"].(string)
		}
	}
	capID := dst.OK("POST", "/v1/products", map[string]any{"source_id": "cap", "name": "Cap", "price": 2000})["id"].(string)
	tier := s["promotion_tier"].(map[string]any)["id"].(string)
	rules := dst.OK("GET", "/v1/validation-rules-assignments?related_object_id="+tier, nil)["data"].([]any)
	if len(rules) != 1 {
		t.Fatalf("the tier's rule assignments: %v", rules)
	}
	rule := dst.OK("GET", "/v1/validation-rules/"+rules[0].(map[string]any)["rule_id"].(string), nil)
	first := rule["rules"].(map[string]any)["1"].(map[string]any)["conditions"].(map[string]any)["$is"].([]any)[0].(map[string]any)
	if first["id"] != product || first["id"] == capID {
		t.Fatalf("the tier's rule names %v, want the product made there, %s", first["id"], product)
	}
}
