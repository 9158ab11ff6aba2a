package tiers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/campaigns"
)

// Mapping changes the points of an earning rule or the price of a reward
// for a tier's members: MULTIPLY by a multiplier, or CUSTOM points.
type Mapping struct {
	Type       string   `json:"type"`
	Multiplier *float64 `json:"multiplier,omitempty"`
	Points     *int64   `json:"points,omitempty"`
}

// Apply maps points.
func (m Mapping) Apply(points int64) int64 {
	if m.Type == "CUSTOM" {
		return *m.Points
	}
	return int64(math.Floor(float64(points) * *m.Multiplier))
}

func (m Mapping) check(at string) error {
	switch m.Type {
	case "MULTIPLY":
		if m.Multiplier == nil || !(*m.Multiplier > 0) || *m.Multiplier > 1000 || m.Points != nil {
			return apierr.InvalidPayload(at + ": a MULTIPLY mapping has a multiplier above 0 and at most 1000, and no points")
		}
	case "CUSTOM":
		if m.Points == nil || *m.Points < 0 || *m.Points > 1_000_000_000 || m.Multiplier != nil {
			return apierr.InvalidPayload(at + ": a CUSTOM mapping has points, 0 to 1000000000, and no multiplier")
		}
	default:
		return apierr.InvalidPayload(at + ": type must be MULTIPLY or CUSTOM")
	}
	return nil
}

// TierAttrs are what the tiers table keeps as a document.
type TierAttrs struct {
	EarningRules map[string]Mapping `json:"earning_rules"`
	Rewards      map[string]Mapping `json:"rewards"`
	Metadata     map[string]any     `json:"metadata"`
}

// Tier is a range of balances whose cards' holders share earning and
// reward terms. Both ends are inclusive; To nil is unbounded.
type Tier struct {
	ID         string
	CampaignID string
	Name       string
	From       int64
	To         *int64
	Attrs      TierAttrs
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

// holds says whether a balance is in the tier's range.
func (t Tier) holds(balance int64) bool {
	return balance >= t.From && (t.To == nil || balance <= *t.To)
}

// Ref is the {id, name} of transaction details.
func (t *Tier) Ref() map[string]any {
	return map[string]any{"id": t.ID, "name": t.Name}
}

// PointsRange is a tier's range.
type PointsRange struct {
	From int64  `json:"from"`
	To   *int64 `json:"to"`
}

// TierView is the reference shape of a loyalty tier.
type TierView struct {
	ID           string             `json:"id"`
	Name         string             `json:"name"`
	CampaignID   string             `json:"campaign_id"`
	EarningRules map[string]Mapping `json:"earning_rules"`
	Rewards      map[string]Mapping `json:"rewards"`
	Points       PointsRange        `json:"points"`
	Config       map[string]any     `json:"config"`
	Metadata     map[string]any     `json:"metadata"`
	CreatedAt    jsonx.Time         `json:"created_at"`
	UpdatedAt    *jsonx.Time        `json:"updated_at"`
	Object       string             `json:"object"`
}

// View renders the tier.
func (t Tier) View() TierView {
	v := TierView{ID: t.ID, Name: t.Name, CampaignID: t.CampaignID, EarningRules: t.Attrs.EarningRules, Rewards: t.Attrs.Rewards,
		Points: PointsRange{From: t.From, To: t.To}, Metadata: t.Attrs.Metadata, CreatedAt: jsonx.Time{Time: t.CreatedAt},
		UpdatedAt: jsonx.Ptr(t.UpdatedAt), Object: "loyalty_tier"}
	v.Config = map[string]any{"points": v.Points}
	if v.EarningRules == nil {
		v.EarningRules = map[string]Mapping{}
	}
	if v.Rewards == nil {
		v.Rewards = map[string]Mapping{}
	}
	if v.Metadata == nil {
		v.Metadata = map[string]any{}
	}
	return v
}

// Of is the tier whose range holds balance, or nil.
func Of(tiers []Tier, balance int64) *Tier {
	for i := range tiers {
		if tiers[i].holds(balance) {
			return &tiers[i]
		}
	}
	return nil
}

// Webhook event types of tiers: a card's holder enters or leaves a tier as its
// balance crosses the tiers' point ranges.
const (
	EventJoined     = "customer.loyalty.tier.joined"
	EventLeft       = "customer.loyalty.tier.left"
	EventUpgraded   = "customer.loyalty.tier.upgraded"
	EventDowngraded = "customer.loyalty.tier.downgraded"
)

// Shift gives emit the tier notices of a balance that went from before to
// after: the tier it left, the one it joined and, from one tier to
// another, the upgrade or downgrade (with the tier left as previous); none
// when the balance stayed in one tier, or in none.
func Shift(tiers []Tier, before, after int64, emit func(event string, t, previous *Tier) error) error {
	from, to := Of(tiers, before), Of(tiers, after)
	if from == to {
		return nil
	}
	if from != nil {
		if err := emit(EventLeft, from, nil); err != nil {
			return err
		}
	}
	if to != nil {
		if err := emit(EventJoined, to, nil); err != nil {
			return err
		}
	}
	if from != nil && to != nil {
		ev := EventUpgraded
		if to.From < from.From {
			ev = EventDowngraded
		}
		return emit(ev, to, from)
	}
	return nil
}

// RuleMapping is the tier's mapping of an earning rule's points.
func (t *Tier) RuleMapping(ruleID string) (Mapping, bool) {
	if t == nil {
		return Mapping{}, false
	}
	m, ok := t.Attrs.EarningRules[ruleID]
	return m, ok
}

// RewardMapping is the tier's mapping of a reward's price.
func (t *Tier) RewardMapping(rewardID string) (Mapping, bool) {
	if t == nil {
		return Mapping{}, false
	}
	m, ok := t.Attrs.Rewards[rewardID]
	return m, ok
}

const tierColumns = `id, campaign_id, name, points_from, points_to, attrs, created_at, updated_at`

func scanTier(r pgx.Row) (Tier, error) {
	var t Tier
	var attrs []byte
	if err := r.Scan(&t.ID, &t.CampaignID, &t.Name, &t.From, &t.To, &attrs, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return Tier{}, err
	}
	return t, json.Unmarshal(attrs, &t.Attrs)
}

func collectTiers(rows pgx.Rows) ([]Tier, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tier, error) { return scanTier(r) })
}

// Column is a column of the campaign k's tiers as one JSON array (NULL
// for none), read with Parse: read with a locked card in its statement,
// they cost no statement of their own on the ledger's hot path.
const Column = `(SELECT jsonb_agg(jsonb_build_object('id', t.id, 'campaign_id', t.campaign_id, 'name', t.name,
	'from', t.points_from, 'to', t.points_to, 'attrs', t.attrs, 'created_at', t.created_at, 'updated_at', t.updated_at))
	FROM loyalty_tiers t WHERE t.project_id = k.project_id AND t.campaign_id = k.id)`

// Parse reads a Column, by range.
func Parse(raw []byte) ([]Tier, error) {
	if raw == nil {
		return nil, nil
	}
	var rows []struct {
		ID         string     `json:"id"`
		CampaignID string     `json:"campaign_id"`
		Name       string     `json:"name"`
		From       int64      `json:"from"`
		To         *int64     `json:"to"`
		Attrs      TierAttrs  `json:"attrs"`
		CreatedAt  time.Time  `json:"created_at"`
		UpdatedAt  *time.Time `json:"updated_at"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("tiers: %w", err)
	}
	ts := make([]Tier, len(rows))
	for i, r := range rows {
		ts[i] = Tier{ID: r.ID, CampaignID: r.CampaignID, Name: r.Name, From: r.From, To: r.To, Attrs: r.Attrs,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].From < ts[j].From })
	return ts, nil
}

// CheckRef is 404 naming a tier id that no tier of the project has:
// an earning rule's loyalty_tier names one of the project's tiers, never
// another project's.
func CheckRef(ctx context.Context, q db.Querier, projectID, tierID string) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM loyalty_tiers WHERE project_id = $1 AND id = $2`, projectID, tierID).Scan(&one)
	if errors.Is(err, db.ErrNotFound) {
		return apierr.NotFound("loyalty_tier", tierID)
	}
	return err
}

// Find reads tier ref.ID of campaign ref.Campaign (an id, already
// resolved), or answers 404: the tier a tier's views (its earning rules,
// its rewards) map their terms by.
func Find(ctx context.Context, q db.Querier, ref campaigns.ItemRef) (Tier, error) {
	t, err := scanTier(q.QueryRow(ctx, `SELECT `+tierColumns+` FROM loyalty_tiers WHERE project_id = $1 AND campaign_id = $2 AND id = $3`,
		ref.Project, ref.Campaign, ref.ID))
	if errors.Is(err, db.ErrNotFound) {
		return Tier{}, apierr.NotFound("loyalty_tier", ref.ID)
	}
	return t, err
}

// CheckRefOf is CheckRef for a tier of one campaign (ref.Campaign, an
// id): a tier event's rule names a tier its own program's cards can move
// through.
func CheckRefOf(ctx context.Context, q db.Querier, ref campaigns.ItemRef) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM loyalty_tiers WHERE project_id = $1 AND campaign_id = $2 AND id = $3`,
		ref.Project, ref.Campaign, ref.ID).Scan(&one)
	if errors.Is(err, db.ErrNotFound) {
		return apierr.NotFound("loyalty_tier", ref.ID)
	}
	return err
}

// tiersOf reads a campaign's tiers by range.
func tiersOf(ctx context.Context, q db.Querier, projectID, campaignID string) ([]Tier, error) {
	rows, err := q.Query(ctx, `SELECT `+tierColumns+` FROM loyalty_tiers WHERE project_id = $1 AND campaign_id = $2
		ORDER BY points_from`, projectID, campaignID)
	if err != nil {
		return nil, err
	}
	return collectTiers(rows)
}
