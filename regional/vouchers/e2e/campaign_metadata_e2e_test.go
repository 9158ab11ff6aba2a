package e2e_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A project whose voucher metadata schema requires a key can still make
// campaigns: one with use_voucher_metadata_schema gives its vouchers'
// metadata as its own (checked against the voucher schema, not the
// campaign's), and every voucher it generates, at creation, by a later
// generation or on publication, carries it. A campaign whose vouchers
// would lack the key, or carry it wrong, is refused naming it, and no
// voucher is made broken.
func TestCampaignVouchersMeetTheVoucherSchema(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.MetadataSchema("voucher", map[string]any{"tier": map[string]any{"type": "string", "optional": false},
		"note": map[string]any{"type": "string", "optional": true}})
	// The campaign schema requires what the flagged campaigns never give:
	// they answer to the voucher schema instead.
	a.MetadataSchema("campaign", map[string]any{"owner": map[string]any{"type": "string", "optional": false}})
	discount := map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 10}}
	campaign := func(name string, extra map[string]any) map[string]any {
		b := map[string]any{"name": name, "campaign_type": "DISCOUNT_COUPONS", "voucher": discount}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	refused := func(what string, r stacktest.Resp, key string) {
		t.Helper()
		m := r.JSON(t)
		if r.Status != 400 || m["key"] != "metadata_validation_failed" || !strings.Contains(m["details"].(string), key) {
			t.Fatalf("%s: %d %s, want 400 metadata_validation_failed naming %s", what, r.Status, r.Body, key)
		}
	}

	// Without the flag the generated vouchers carry no metadata: refused,
	// and nothing is left behind.
	refused("vouchers without tier", a.Do("POST", "/v1/campaigns", campaign("Bare", map[string]any{
		"metadata": map[string]any{"owner": "ops"}, "vouchers_count": 3})), "tier: is required")
	a.Fails("GET", "/v1/campaigns/Bare", nil, 404, "")
	refused("an AUTO_UPDATE campaign, which makes vouchers as it publishes",
		a.Do("POST", "/v1/campaigns", campaign("Bare", map[string]any{"metadata": map[string]any{"owner": "ops"}})), "tier")
	refused("the vouchers' tier of the wrong type", a.Do("POST", "/v1/campaigns", campaign("Wrong", map[string]any{
		"use_voucher_metadata_schema": true, "metadata": map[string]any{"tier": 5}, "vouchers_count": 3})), "tier: must be a string")

	tier := map[string]any{"tier": "gold"}
	c := a.OK("POST", "/v1/campaigns", campaign("Gold", map[string]any{"use_voucher_metadata_schema": true,
		"metadata": tier, "vouchers_count": 3}))
	if c["use_voucher_metadata_schema"] != true || !reflect.DeepEqual(c["metadata"], tier) {
		t.Fatalf("campaign: %v", c)
	}
	a.WaitAction(c["async_action_id"].(string))
	id := c["id"].(string)
	act := a.Do("POST", "/v1/campaigns/"+id+"/vouchers?vouchers_count=2", nil).JSON(t)
	a.WaitAction(act["async_action_id"].(string))
	// An update of its metadata stays under the voucher schema (the
	// reference's update takes no use_voucher_metadata_schema: the flag is
	// the campaign's for good).
	refused("the vouchers' metadata without tier", a.Do("PUT", "/v1/campaigns/"+id, map[string]any{
		"metadata": map[string]any{"note": "x"}}), "tier: is required")
	// A STATIC campaign without the flag may exist (its vouchers come from
	// elsewhere), but it generates none without the tier.
	static := a.OK("POST", "/v1/campaigns", campaign("Static", map[string]any{"type": "STATIC",
		"metadata": map[string]any{"owner": "ops"}}))["id"].(string)
	refused("a generation of the STATIC campaign", a.Do("POST", "/v1/campaigns/"+static+"/vouchers?vouchers_count=2", nil), "tier")
	a.OK("POST", "/v1/campaigns/"+static+"/vouchers", map[string]any{"metadata": map[string]any{"tier": "own"}})

	vs := a.OK("GET", "/v1/vouchers?campaign_id="+id+"&limit=100", nil)["vouchers"].([]any)
	if len(vs) != 5 {
		t.Fatalf("%d vouchers in the campaign, want 5 (3 made with it, 2 added)", len(vs))
	}
	// A publication of an AUTO_UPDATE campaign without free vouchers makes
	// its voucher.
	a.OK("POST", "/v1/campaigns", campaign("Published", map[string]any{"use_voucher_metadata_schema": true, "metadata": tier}))
	pub := a.OK("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Published"},
		"customer": map[string]any{"source_id": "ann"}})
	vs = append(vs, pub["voucher"])
	for _, v := range vs {
		if md := v.(map[string]any)["metadata"]; !reflect.DeepEqual(md, tier) {
			t.Fatalf("voucher %v: metadata %v, want the campaign's %v", v.(map[string]any)["code"], md, tier)
		}
	}
	if vs := a.OK("GET", "/v1/vouchers?campaign_id="+static, nil)["vouchers"].([]any); len(vs) != 1 {
		t.Fatalf("the STATIC campaign holds %d vouchers, want its one", len(vs))
	}
}
