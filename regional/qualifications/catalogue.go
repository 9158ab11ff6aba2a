package qualifications

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/rules"
)

// CatalogueTTL is how old the promotion tiers, their campaigns' windows and
// their rule assignments that qualifications read may be. Qualifications
// advise; validations and redemptions always read these fresh.
const CatalogueTTL = time.Second

// catalogue is a project's automatic redeemables as qualifications read
// them: every active tier, its campaign's window, the rules assigned to
// each tier and campaign, and the tiers indexed by those rules' cheap
// parts, so that a qualification judges only the tiers that may pass
// (the index is as old as the assignments: at most CatalogueTTL).
type catalogue struct {
	at    time.Time
	tiers []engine.Tier
	index *rules.Index // nil: every tier is judged
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
	if c.index, err = s.indexOf(ctx, q, projectID, c); err != nil {
		return nil, err
	}
	slot.cat = c
	return c, nil
}

// indexOf indexes the catalogue's tiers by their own and their campaign's
// rules; nil when none has rules.
func (s *Service) indexOf(ctx context.Context, q db.Querier, projectID string, c *catalogue) (*rules.Index, error) {
	var ids []string
	seen := map[string]bool{}
	for _, t := range c.tiers {
		for _, id := range append(c.Rules[t.ID], c.Rules[t.CampaignID]...) {
			if !seen[id] {
				seen[id], ids = true, append(ids, id)
			}
		}
	}
	if len(ids) == 0 || s.engine.Rules == nil {
		return nil, nil
	}
	progs, err := s.engine.Rules.Programs(ctx, q, projectID, ids)
	if err != nil {
		return nil, err
	}
	entries := make([][]*rules.Program, len(c.tiers))
	for i, t := range c.tiers {
		for _, id := range append(c.Rules[t.ID], c.Rules[t.CampaignID]...) {
			entries[i] = append(entries[i], progs[id])
		}
	}
	return rules.NewIndex(entries), nil
}

// Tests compare the screened answers with those of judging every tier
// (fullEvaluation) and count the tiers judged (judgedTiers).
var (
	fullEvaluation atomic.Bool
	judgedTiers    atomic.Int64
)
