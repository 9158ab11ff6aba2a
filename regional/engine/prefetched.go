package engine

import "github.com/tallyhq/tally/regional/campaigns"

// preObject is what a Prefetched holds of one object (a tier, a campaign):
// judging looks each of a candidate's objects up once, not in each of
// Windows, Known and Rules in turn (eleven lookups a tier in maps of
// thousands of keys were a third of judging's CPU at 1,000 tiers; issue
// 39).
type preObject struct {
	window *campaigns.Window // a campaign's, nil for none
	rules  []string
	known  bool
}

// tierObjects are what a Prefetched holds of a tier and of its campaign.
type tierObjects struct {
	id       string // the tier's
	tier     preObject
	campaign preObject
}

// Intern indexes what p holds by object, and of tiers (those judging will
// be given by TierCandidate) by their place in tiers, for judging to look
// each object up once and a tier's not at all. Call it when p is filled
// and before it is shared (the qualifications' catalogue, read by every
// request of a second): p must not change after. Judging gives the same
// answers without it.
func (p *Prefetched) Intern(tiers []Tier) {
	objects := make(map[string]preObject, len(p.Known)+len(p.Windows))
	for id := range p.Known {
		objects[id] = p.lookup(id)
	}
	for id := range p.Rules {
		objects[id] = p.lookup(id)
	}
	for id := range p.Windows {
		objects[id] = p.lookup(id)
	}
	p.objects = objects
	p.tiers = make([]tierObjects, len(tiers))
	for i, t := range tiers {
		p.tiers[i] = tierObjects{id: t.ID, tier: p.object(t.ID), campaign: p.object(t.CampaignID)}
	}
}

// TierCandidate is the candidate of tiers[i], t or a copy of it, of the
// tiers p was interned with: judging takes what p holds of it from there.
func (p *Prefetched) TierCandidate(i int, t *Tier) *Candidate {
	c := TierCandidate(t)
	if i < len(p.tiers) && p.tiers[i].id == t.ID {
		c.pre = &p.tiers[i]
	}
	return c
}

// object is what p holds of id; the zero preObject for "" or for an
// object p holds nothing of.
func (p *Prefetched) object(id string) preObject {
	if id == "" {
		return preObject{}
	}
	if p.objects != nil {
		return p.objects[id]
	}
	return p.lookup(id)
}

// lookup is object from p's maps.
func (p *Prefetched) lookup(id string) preObject {
	o := preObject{known: p.Known[id]}
	o.rules = p.Rules[id]
	if w, ok := p.Windows[id]; ok {
		o.window = &w
	}
	return o
}

// hasCampaign says whether p holds the campaign's window or knows it.
func (o preObject) hasCampaign() bool { return o.window != nil || o.known }
