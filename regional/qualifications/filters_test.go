package qualifications

import (
	"encoding/json"
	"testing"

	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/vouchers"
)

// holder_role: a referral code in the wallet is the customer's as its
// referrer, any other voucher as its owner; a tier has no holder.
func TestHolderRoleFilter(t *testing.T) {
	ann := "cust_ann"
	referral := &offer{req: engine.Redeemable{Object: "voucher", ID: "REF-1"}, objectID: "v_1",
		voucher:  &vouchers.Voucher{ID: "v_1", Code: "REF-1", Type: vouchers.Discount, HolderID: &ann},
		campaign: &campaigns.Window{ID: "camp_1", CampaignType: "REFERRAL_PROGRAM"}}
	owned := &offer{req: engine.Redeemable{Object: "voucher", ID: "W-1"}, objectID: "v_2",
		voucher:  &vouchers.Voucher{ID: "v_2", Code: "W-1", Type: vouchers.Discount, HolderID: &ann},
		campaign: &campaigns.Window{ID: "camp_2", CampaignType: "DISCOUNT_COUPONS"}}
	tier := &offer{req: engine.Redeemable{Object: "promotion_tier", ID: "promo_1"}, objectID: "promo_1",
		tier:     &engine.Tier{ID: "promo_1", CampaignID: "camp_3"},
		campaign: &campaigns.Window{ID: "camp_3", CampaignType: "PROMOTION"}}
	for _, r := range []struct {
		filter string
		want   [3]bool // referral, owned, tier
	}{
		{`{"holder_role":{"conditions":{"$is":["REFERRER"]}}}`, [3]bool{true, false, false}},
		{`{"holder_role":{"conditions":{"$in":["OWNER","REFEREE"]}}}`, [3]bool{false, true, false}},
		{`{"holder_role":{"conditions":{"$not_in":["OWNER"]}}}`, [3]bool{true, false, true}},
		{`{"holder_role":{"conditions":{"$is":["REFEREE","REFERRER"]}}}`, [3]bool{false, false, false}},
		{`{"holder_role":{"conditions":{"$has_value":[]}}}`, [3]bool{true, true, false}},
		{`{"junction":"or","holder_role":{"conditions":{"$is":["REFERRER"]}},"resource_type":{"conditions":{"$is":["promotion_tier"]}}}`,
			[3]bool{true, false, true}},
	} {
		f, err := parseFilters(json.RawMessage(r.filter))
		if err != nil {
			t.Fatalf("%s: %v", r.filter, err)
		}
		for i, c := range []*offer{referral, owned, tier} {
			if got := f.admits(c); got != r.want[i] {
				t.Errorf("%s, candidate %d: %v, want %v", r.filter, i, got, r.want[i])
			}
		}
	}
}
