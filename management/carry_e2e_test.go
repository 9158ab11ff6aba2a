package management_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A template whose rule names a product, an AUTO_UPDATE collection, an
// auto-update segment and a location of its project, copied to a project
// of another cluster, makes them there at its first campaign-setup and
// lists them in created_resources; the rule, rewritten to their ids there,
// admits only what it admitted at home; a second setup matches them
// (products by source_id, the rest by name) and makes none again.
func TestATemplateCopyMakesWhatItsRulesNameInTheDestination(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	h := e.MgmtHeader()
	src := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	dst := stacktest.API{T: t, E: e, P: e.CreateProject(t, "us1")}
	rule, carried := src.CarriedRule("red hats for Berliners")
	loc, hat, coll, seg := carried["location"], carried["product"], carried["products_collection"], carried["segment"]
	camp := src.OK("POST", "/v1/campaigns", map[string]any{"name": "Hats", "campaign_type": "DISCOUNT_COUPONS", "type": "STATIC",
		"voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "AMOUNT", "amount_off": 500}}})
	src.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "campaign",
		"related_object_id": camp["id"]})
	tpl := src.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Hats template", "campaign_id": "Hats"})
	r := e.Do(t, "POST", base+"/projects/"+src.P.ID+"/templates/campaigns/"+tpl["id"].(string)+"/copy", h,
		map[string]any{"name": "Hats abroad", "destination_project_id": dst.P.ID})
	if r.Status != 200 {
		t.Fatalf("copy: %d %s", r.Status, r.Body)
	}
	cp := r.JSON(t)["id"].(string)

	setup := func(name string) (map[string]any, map[string]string) {
		t.Helper()
		s := dst.OK("POST", "/v1/templates/campaigns/"+cp+"/campaign-setup", map[string]any{"name": name})
		made := map[string]string{}
		for _, x := range s["created_resources"].([]any) {
			made[x.(map[string]any)["object"].(string)] = x.(map[string]any)["id"].(string)
		}
		return s["campaign"].(map[string]any), made
	}
	first, made := setup("Hats abroad")
	var kinds []string
	for k := range made {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	if want := []string{"location", "product", "products_collection", "segments", "validation_rules"}; !slices.Equal(kinds, want) {
		t.Fatalf("created_resources: %v, want one each of %v", made, want)
	}
	for k, path := range map[string]string{"location": "/v1/locations/", "product": "/v1/products/",
		"products_collection": "/v1/product-collections/", "segments": "/v1/segments/"} {
		if made[k] == loc || made[k] == hat || made[k] == coll || made[k] == seg {
			t.Fatalf("%s kept its source's id %s", k, made[k])
		}
		dst.OK("GET", path+made[k], nil)
	}
	if p := dst.OK("GET", "/v1/products/hat", nil); p["id"] != made["product"] || p["name"] != "Hat" || stacktest.Num(p["price"]) != 2000 {
		t.Fatalf("the product made there: %v", p)
	}
	if g := dst.OK("GET", "/v1/segments/"+made["segments"], nil); g["name"] != "Berliners" || g["type"] != "auto-update" {
		t.Fatalf("the segment made there: %v", g)
	}

	// The rule works there: a Berliner's order of the red hat in a Berlin
	// store passes; another product, a customer elsewhere, a store
	// elsewhere do not.
	ids := map[string]string{"hat": made["product"], "cap": dst.OK("POST", "/v1/products", map[string]any{"source_id": "cap", "name": "Cap",
		"price": 2000, "metadata": map[string]any{"colour": "red"}})["id"].(string)}
	dst.OK("POST", "/v1/customers", map[string]any{"source_id": "ann", "metadata": map[string]any{"at": "geo:52.52,13.40"}})
	dst.OK("POST", "/v1/customers", map[string]any{"source_id": "bob", "metadata": map[string]any{"at": "geo:10,10"}})
	code := dst.OK("POST", "/v1/campaigns/"+first["id"].(string)+"/vouchers", map[string]any{})["code"].(string)
	valid := func(customer, product, store string) bool {
		v := dst.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": code}},
			"customer": map[string]any{"source_id": customer},
			"order": map[string]any{"amount": 2000, "metadata": map[string]any{"store": store},
				"items": []any{map[string]any{"product_id": ids[product], "quantity": 1, "price": 2000}}}})
		return v["valid"] == true
	}
	const inBerlin = "geo:52.521,13.41"
	deadline := time.Now().Add(15 * time.Second) // the segment takes Ann in the asynchronous phase
	for !valid("ann", "hat", inBerlin) {
		if time.Now().After(deadline) {
			t.Fatalf("Ann's order of the hat in Berlin is refused by the rule made there: %v",
				dst.OK("GET", "/v1/validation-rules/"+made["validation_rules"], nil)["rules"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if valid("ann", "cap", inBerlin) || valid("bob", "hat", inBerlin) || valid("ann", "hat", "geo:10,10") {
		t.Fatalf("the rule there admits another product %v, a customer elsewhere %v, a store elsewhere %v",
			valid("ann", "cap", inBerlin), valid("bob", "hat", inBerlin), valid("ann", "hat", "geo:10,10"))
	}

	// A second setup matches what the first made, and makes only its rule.
	if _, again := setup("Hats again"); len(again) != 1 || again["validation_rules"] == "" {
		t.Fatalf("the second setup made %v", again)
	}
	if l := dst.OK("GET", "/v1/locations", nil); len(l["data"].([]any)) != 1 {
		t.Fatalf("locations there: %v", l)
	}
}

// A promotion tier's template whose rule names a product, copied to a
// project of another cluster, makes the product there at its first
// tier-setup (listed in created_resources beside the rule), and the tier
// added there validates an order of that product only.
func TestATierTemplateCopyMakesItsProductAtTierSetup(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	src := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	dst := stacktest.API{T: t, E: e, P: e.CreateProject(t, "as1")}
	hat := src.OK("POST", "/v1/products", map[string]any{"source_id": "hat", "name": "Hat", "price": 2000})["id"].(string)
	rule := src.OK("POST", "/v1/validation-rules", map[string]any{"name": "hats", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "order.items.any",
			"conditions": map[string]any{"$is": []any{map[string]any{"object": "product", "id": hat}}}}, "logic": "1"}})
	p := src.OK("POST", "/v1/campaigns", map[string]any{"name": "Autumn", "campaign_type": "PROMOTION", "promotion": map[string]any{
		"tiers": []any{map[string]any{"name": "Hats", "validation_rules": []any{rule["id"]},
			"action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 500}}}}}})
	tier := p["promotion"].(map[string]any)["tiers"].([]any)[0].(map[string]any)["id"].(string)
	tpl := src.OK("POST", "/v1/templates/campaigns", map[string]any{"name": "Hats tier", "promotion_tier_id": tier})
	r := e.Do(t, "POST", base+"/projects/"+src.P.ID+"/templates/campaigns/"+tpl["id"].(string)+"/copy", e.MgmtHeader(),
		map[string]any{"name": "Hats tier abroad", "destination_project_id": dst.P.ID})
	if r.Status != 200 {
		t.Fatalf("copy: %d %s", r.Status, r.Body)
	}
	cp := r.JSON(t)["id"].(string)
	dst.OK("POST", "/v1/campaigns", map[string]any{"name": "Winter", "campaign_type": "PROMOTION", "promotion": map[string]any{
		"tiers": []any{map[string]any{"name": "first", "action": map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 1}},
			"metadata": map[string]any{"k": "v"}}}}})
	s := dst.OK("POST", "/v1/templates/campaigns/"+cp+"/tier-setup", map[string]any{"name": "Hats here", "campaign_id": "Winter"})
	made := map[string]string{}
	for _, x := range s["created_resources"].([]any) {
		made[x.(map[string]any)["object"].(string)] = x.(map[string]any)["id"].(string)
	}
	if len(made) != 2 || made["product"] == "" || made["product"] == hat || made["validation_rules"] == "" {
		t.Fatalf("created_resources: %v, want the product (made there) and the rule", s["created_resources"])
	}
	if got := dst.OK("GET", "/v1/products/hat", nil); got["id"] != made["product"] || got["name"] != "Hat" {
		t.Fatalf("the product there: %v", got)
	}
	capID := dst.OK("POST", "/v1/products", map[string]any{"source_id": "cap", "name": "Cap", "price": 2000})["id"].(string)
	newTier := s["promotion_tier"].(map[string]any)["id"].(string)
	valid := func(product string) bool {
		return dst.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "promotion_tier", "id": newTier}},
			"order": map[string]any{"amount": 2000, "items": []any{map[string]any{"product_id": product, "quantity": 1, "price": 2000}}}})["valid"] == true
	}
	if !valid(made["product"]) || valid(capID) {
		t.Fatalf("the tier there: the hat made there %v (want valid), a cap %v (want not)", valid(made["product"]), valid(capID))
	}
}
