package qualifications

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/runtimex"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/validation"
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
	// progs are the rules the index was made of, taken again by the next
	// read when their versions are current, and entries what it indexes:
	// a read that finds the same makes no new index.
	progs   map[string]validation.Compiled
	entries [][]*rules.Program
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
	mu         sync.Mutex // held by the read under way
	cur        atomic.Pointer[catalogue]
	refreshing atomic.Bool
}

// refreshAhead is the age at which a project's catalogue is read again in
// the background while it is still served: at 10,000 tiers a read takes a
// few hundred milliseconds, and every qualification of the project that
// found the catalogue past CatalogueTTL waited for it (p95 167 ms at 100
// a second, the scale section). A project asked for at least once in the
// last 0.4 s of its catalogue's life never waits; one asked for rarely
// reads it in its request, as before.
const refreshAhead = CatalogueTTL * 6 / 10

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
	if c := slot.cur.Load(); c != nil && now.Sub(c.at) < CatalogueTTL && !now.Before(c.at) {
		if now.Sub(c.at) >= refreshAhead && slot.refreshing.CompareAndSwap(false, true) {
			go func() {
				defer slot.refreshing.Store(false)
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				_ = runtimex.Call(func() error {
					_, err := s.read(rctx, q, projectID, slot, s.engine.Now())
					return err
				})
			}()
		}
		return c, nil
	}
	return s.read(ctx, q, projectID, slot, now)
}

// read reads the project's catalogue as of now into slot, one read at a
// time; one that waited for another takes what it read.
func (s *Service) read(ctx context.Context, q db.Querier, projectID string, slot *catalogueSlot, now time.Time) (_ *catalogue, err error) {
	ctx, span := tracer.Start(ctx, "qualifications.catalogue")
	defer telemetry.End(span, &err)
	slot.mu.Lock()
	defer slot.mu.Unlock()
	prev := slot.cur.Load()
	if prev != nil && now.Sub(prev.at) < refreshAhead && !now.Before(prev.at) {
		return prev, nil
	}
	c := &catalogue{at: now, Prefetched: engine.Prefetched{Windows: map[string]campaigns.Window{}, Rules: map[string][]string{},
		Known: map[string]bool{}}}
	if s.tiers != nil {
		if c.tiers, err = s.tiers.ActiveTiers(ctx, q, projectID); err != nil {
			return nil, err
		}
	}
	var campaignIDs, objects []string
	for _, t := range c.tiers {
		campaignIDs, objects = append(campaignIDs, t.CampaignID), append(objects, t.ID, t.CampaignID)
	}
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
	c.Intern(c.tiers)
	if err = s.indexOf(ctx, q, projectID, c, prev); err != nil {
		return nil, err
	}
	slot.cur.Store(c)
	return c, nil
}

// indexOf indexes the catalogue's tiers by their own and their campaign's
// rules (none when no tier has rules); from prev, the catalogue before,
// it takes the rules still current and, when nothing changed, the index.
func (s *Service) indexOf(ctx context.Context, q db.Querier, projectID string, c, prev *catalogue) error {
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
		return nil
	}
	var kept map[string]validation.Compiled
	if prev != nil {
		kept = prev.progs
	}
	var err error
	if c.progs, err = s.engine.Rules.ProgramsSince(ctx, q, projectID, ids, kept); err != nil {
		return err
	}
	c.entries = make([][]*rules.Program, len(c.tiers))
	for i, t := range c.tiers {
		for _, id := range append(c.Rules[t.ID], c.Rules[t.CampaignID]...) {
			c.entries[i] = append(c.entries[i], c.progs[id].Program) // nil: deleted meanwhile, not screened
		}
	}
	if prev != nil && prev.index != nil && sameEntries(prev.entries, c.entries) {
		c.index = prev.index
		return nil
	}
	c.index = rules.NewIndex(c.entries)
	return nil
}

// sameEntries says whether a and b index the same programs in the same
// places.
func sameEntries(a, b [][]*rules.Program) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for k := range a[i] {
			if a[i][k] != b[i][k] {
				return false
			}
		}
	}
	return true
}

// Tests compare the screened answers with those of judging every tier
// (fullEvaluation) and count the tiers judged (judgedTiers).
var (
	fullEvaluation atomic.Bool
	judgedTiers    atomic.Int64
)
