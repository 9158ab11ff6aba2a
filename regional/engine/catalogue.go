package engine

import (
	"context"
	"sync"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/loyalty"
)

// CatalogueTTL is how old the promotion tiers, their campaigns' windows and
// their rule assignments that qualifications read may be. Qualifications
// advise; validations and redemptions always read these fresh.
const CatalogueTTL = time.Second

// catalogue is a project's automatic redeemables as qualifications read
// them: every active tier, its campaign's window, and the rules assigned to
// each tier and campaign.
type catalogue struct {
	at      time.Time
	tiers   []Tier
	windows map[string]loyalty.CampaignWindow
	rules   map[string][]string // by object id; objects without rules are in known
	known   map[string]bool
}

func (c *catalogue) hasCampaign(id string) bool { _, ok := c.windows[id]; return ok || c.known[id] }

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
func (e *Engine) catalogue(ctx context.Context, q db.Querier, projectID string, now time.Time) (*catalogue, error) {
	e.cats.mu.Lock()
	if e.cats.by == nil {
		e.cats.by = map[string]*catalogueSlot{}
	}
	slot := e.cats.by[projectID]
	if slot == nil && len(e.cats.by) >= 10_000 {
		e.cats.by = map[string]*catalogueSlot{} // bounded: the projects asked for lately refill it
	}
	if slot == nil {
		slot = &catalogueSlot{}
		e.cats.by[projectID] = slot
	}
	e.cats.mu.Unlock()
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if c := slot.cat; c != nil && now.Sub(c.at) < CatalogueTTL && !now.Before(c.at) {
		return c, nil
	}
	c := &catalogue{at: now, windows: map[string]loyalty.CampaignWindow{}, rules: map[string][]string{}, known: map[string]bool{}}
	if e.tiers != nil {
		var err error
		if c.tiers, err = e.tiers.ActiveTiers(ctx, q, projectID); err != nil {
			return nil, err
		}
	}
	var campaignIDs, objects []string
	for _, t := range c.tiers {
		campaignIDs, objects = append(campaignIDs, t.CampaignID), append(objects, t.ID, t.CampaignID)
	}
	var err error
	if c.windows, err = loyalty.CampaignWindowsByID(ctx, q, projectID, campaignIDs); err != nil {
		return nil, err
	}
	if e.rules != nil && len(objects) > 0 {
		if c.rules, err = e.rules.RulesOfAll(ctx, q, projectID, objects); err != nil {
			return nil, err
		}
	}
	for _, o := range objects {
		c.known[o] = true
	}
	slot.cat = c
	return c, nil
}
