package qualifications

import (
	"context"
	"sync"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/engine"
)

// CatalogueTTL is how old the promotion tiers, their campaigns' windows and
// their rule assignments that qualifications read may be. Qualifications
// advise; validations and redemptions always read these fresh.
const CatalogueTTL = time.Second

// catalogue is a project's automatic redeemables as qualifications read
// them: every active tier, its campaign's window, and the rules assigned to
// each tier and campaign.
type catalogue struct {
	at    time.Time
	tiers []engine.Tier
	// What the engine's judging takes from it rather than reading again:
	// rules by object id; objects without rules are in Known.
	engine.Prefetched
}

// catalogues are the projects' catalogues, one read at a time per project.
type catalogues struct {
	mu sync.Mutex
	by map[string]*catalogueSlot
}

type catalogueSlot struct {
	mu  sync.Mutex
	cat *catalogue
}

// catalogue returns the project's catalogue, read again when older than
// CatalogueTTL: concurrent qualifications of a project wait for one read.
func (s *Service) catalogue(ctx context.Context, q db.Querier, projectID string, now time.Time) (*catalogue, error) {
	s.cats.mu.Lock()
	if s.cats.by == nil {
		s.cats.by = map[string]*catalogueSlot{}
	}
	slot := s.cats.by[projectID]
	if slot == nil && len(s.cats.by) >= 10_000 {
		s.cats.by = map[string]*catalogueSlot{} // bounded: the projects asked for lately refill it
	}
	if slot == nil {
		slot = &catalogueSlot{}
		s.cats.by[projectID] = slot
	}
	s.cats.mu.Unlock()
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if c := slot.cat; c != nil && now.Sub(c.at) < CatalogueTTL && !now.Before(c.at) {
		return c, nil
	}
	c := &catalogue{at: now, Prefetched: engine.Prefetched{Windows: map[string]campaigns.Window{}, Rules: map[string][]string{},
		Known: map[string]bool{}}}
	if s.tiers != nil {
		var err error
		if c.tiers, err = s.tiers.ActiveTiers(ctx, q, projectID); err != nil {
			return nil, err
		}
	}
	var campaignIDs, objects []string
	for _, t := range c.tiers {
		campaignIDs, objects = append(campaignIDs, t.CampaignID), append(objects, t.ID, t.CampaignID)
	}
	var err error
	if c.Windows, err = campaigns.WindowsByID(ctx, q, projectID, campaignIDs); err != nil {
		return nil, err
	}
	if s.engine.Rules != nil && len(objects) > 0 {
		if c.Rules, err = s.engine.Rules.RulesOfAll(ctx, q, projectID, objects); err != nil {
			return nil, err
		}
	}
	for _, o := range objects {
		c.Known[o] = true
	}
	slot.cat = c
	return c, nil
}
