package engine

import (
	"reflect"
	"testing"

	"github.com/tallyhq/tally/regional/campaigns"
)

// Interned, a Prefetched answers judging's every question as its maps do:
// a campaign's window, an object's rules, whether it is known; nothing for
// an object it does not hold or for "". A tier's candidate it makes holds
// what it has of the tier and its campaign, when the tier is the one in
// that place.
func TestAnInternedPrefetchedAnswersAsItsMaps(t *testing.T) {
	p := Prefetched{
		Windows: map[string]campaigns.Window{"camp_1": {ID: "camp_1", Name: "One"}, "camp_2": {ID: "camp_2"}},
		Rules:   map[string][]string{"tier_1": {"val_1"}, "camp_1": {"val_2", "val_3"}, "tier_2": nil},
		Known:   map[string]bool{"tier_1": true, "tier_2": true, "tier_3": true, "camp_1": true, "camp_3": true},
	}
	ids := []string{"", "tier_1", "tier_2", "tier_3", "tier_4", "camp_1", "camp_2", "camp_3", "camp_4"}
	want := map[string]preObject{}
	for _, id := range ids {
		want[id] = p.object(id)
	}
	tiers := []Tier{{ID: "tier_1", CampaignID: "camp_1"}, {ID: "tier_3", CampaignID: "camp_4"}}
	p.Intern(tiers)
	if len(p.objects) != 6 {
		t.Fatalf("interned %d objects, want the 6 the maps hold", len(p.objects))
	}
	for _, id := range ids {
		if got := p.object(id); !reflect.DeepEqual(got, want[id]) {
			t.Errorf("%q: interned %+v, from the maps %+v", id, got, want[id])
		}
	}
	if o := p.object("camp_1"); o.window == nil || o.window.Name != "One" || !o.hasCampaign() || len(o.rules) != 2 {
		t.Errorf("camp_1: %+v", o)
	}
	if o := p.object("camp_4"); o.hasCampaign() || o.rules != nil || o.known {
		t.Errorf("camp_4, not held: %+v", o)
	}
	for i, tier := range tiers {
		c := p.TierCandidate(i, &tier)
		if c.pre == nil || !reflect.DeepEqual(c.pre.tier, want[tier.ID]) || !reflect.DeepEqual(c.pre.campaign, want[tier.CampaignID]) {
			t.Errorf("tier %d: %+v", i, c.pre)
		}
	}
	if c := p.TierCandidate(0, &Tier{ID: "tier_3"}); c.pre != nil {
		t.Errorf("a tier not in its place took the place's: %+v", c.pre)
	}
	if c := p.TierCandidate(5, &Tier{ID: "tier_3"}); c.pre != nil || c.ObjectID() != "tier_3" {
		t.Errorf("a tier past the interned: %+v", c)
	}
}
