package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
)

// Webhook events of tiers: a card's holder enters or leaves a tier as its
// balance crosses the tiers' point ranges.
const (
	EventTierJoined     = "customer.loyalty.tier.joined"
	EventTierLeft       = "customer.loyalty.tier.left"
	EventTierUpgraded   = "customer.loyalty.tier.upgraded"
	EventTierDowngraded = "customer.loyalty.tier.downgraded"
)

// Mapping changes the points of an earning rule or the price of a reward
// for a tier's members: MULTIPLY by a multiplier, or CUSTOM points.
type Mapping struct {
	Type       string   `json:"type"`
	Multiplier *float64 `json:"multiplier,omitempty"`
	Points     *int64   `json:"points,omitempty"`
}

// apply maps points.
func (m Mapping) apply(points int64) int64 {
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

// ref is the {id, name} of transaction details.
func (t *Tier) ref() map[string]any {
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

// tierOf is the tier whose range holds balance, or nil.
func tierOf(tiers []Tier, balance int64) *Tier {
	for i := range tiers {
		if tiers[i].holds(balance) {
			return &tiers[i]
		}
	}
	return nil
}

// inTier says whether the rule earns for a holder in tier t (nil: none).
func (r EarningRule) inTier(t *Tier) bool {
	scope := r.Attrs.LoyaltyTier
	if scope == nil || scope.ID == "" || scope.ID == "__ANY__" {
		return true
	}
	return t != nil && t.ID == scope.ID
}

// ruleMapping is the tier's mapping of an earning rule's points.
func (t *Tier) ruleMapping(ruleID string) (Mapping, bool) {
	if t == nil {
		return Mapping{}, false
	}
	m, ok := t.Attrs.EarningRules[ruleID]
	return m, ok
}

// rewardMapping is the tier's mapping of a reward's price.
func (t *Tier) rewardMapping(rewardID string) (Mapping, bool) {
	if t == nil {
		return Mapping{}, false
	}
	m, ok := t.Attrs.Rewards[rewardID]
	return m, ok
}

// withTiers adds to the details of an accrual or a pending entry the tier
// of the holder (nil: none), which is the tier the entry was made in.
func withTiers(details map[string]any, holder *Tier) map[string]any {
	if holder != nil {
		details["loyalty_tier"] = holder.ref()
		details["holder_loyalty_tier"] = holder.ref()
	}
	return details
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

// tiersJSON is a column of the campaign k's tiers as one JSON array (NULL
// for none): read with a locked card in its statement, they cost no
// statement of their own on the ledger's hot path.
const tiersJSON = `(SELECT jsonb_agg(jsonb_build_object('id', t.id, 'campaign_id', t.campaign_id, 'name', t.name,
	'from', t.points_from, 'to', t.points_to, 'attrs', t.attrs, 'created_at', t.created_at, 'updated_at', t.updated_at))
	FROM loyalty_tiers t WHERE t.project_id = k.project_id AND t.campaign_id = k.id)`

// parseTiers reads a tiersJSON column, by range.
func parseTiers(raw []byte) ([]Tier, error) {
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
		return nil, fmt.Errorf("loyalty: tiers: %w", err)
	}
	ts := make([]Tier, len(rows))
	for i, r := range rows {
		ts[i] = Tier{ID: r.ID, CampaignID: r.CampaignID, Name: r.Name, From: r.From, To: r.To, Attrs: r.Attrs,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].From < ts[j].From })
	return ts, nil
}

// checkTierRef is 404 naming a tier id that no tier of the project has:
// an earning rule's loyalty_tier names one of the project's tiers, never
// another project's.
func checkTierRef(ctx context.Context, q db.Querier, projectID string, ref *IDRef) error {
	if ref == nil || ref.ID == "" || ref.ID == "__ANY__" { // no tier, or any (see inTier)
		return nil
	}
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM loyalty_tiers WHERE project_id = $1 AND id = $2`, projectID, ref.ID).Scan(&one)
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

// queueTierShift queues the events of a card whose balance went from
// before to its present one, when that moved it between tiers.
func (s *Service) queueTierShift(ctx context.Context, b *pgx.Batch, projectID string, card Card, camp Campaign, before int64) error {
	if len(camp.Tiers) == 0 {
		return nil
	}
	from, to := tierOf(camp.Tiers, before), tierOf(camp.Tiers, card.Balance)
	if from == to {
		return nil
	}
	holder := ""
	if card.HolderID != nil {
		holder = *card.HolderID
	}
	body := func(t *Tier) map[string]any {
		return map[string]any{"loyalty_tier": t.View(), "customer": map[string]any{"id": holder, "object": "customer"},
			"campaign": map[string]any{"id": camp.ID, "name": camp.Name}, "voucher": card.View(camp)}
	}
	if from != nil {
		if err := s.events.Queue(ctx, b, projectID, EventTierLeft, card.ID, body(from)); err != nil {
			return err
		}
	}
	if to != nil {
		if err := s.events.Queue(ctx, b, projectID, EventTierJoined, card.ID, body(to)); err != nil {
			return err
		}
	}
	if from != nil && to != nil {
		ev := EventTierUpgraded
		if to.From < from.From {
			ev = EventTierDowngraded
		}
		o := body(to)
		o["previous_loyalty_tier"] = from.View()
		return s.events.Queue(ctx, b, projectID, ev, card.ID, o)
	}
	return nil
}

// TierRequest is one tier of POST /v1/loyalties/{campaignId}/tiers.
type TierRequest struct {
	Name         *string            `json:"name"`
	EarningRules map[string]Mapping `json:"earning_rules"`
	Rewards      map[string]Mapping `json:"rewards"`
	Points       *struct {
		From *int64 `json:"from"`
		To   *int64 `json:"to"`
	} `json:"points"`
	Metadata map[string]any `json:"metadata"`
}

// maxTiers bounds a campaign's tiers: every balance change reads them all.
const maxTiers = 100

// CreateTiers adds tiers to a campaign: their ranges may not overlap each
// other's or those of the campaign's tiers.
func (s *Service) CreateTiers(ctx context.Context, projectID, campaignID string, rs []TierRequest) ([]TierView, error) {
	if len(rs) == 0 || len(rs) > 100 {
		return nil, apierr.InvalidPayload("the body is a list of 1 to 100 tiers: [{\"name\": …, \"points\": {\"from\": …, \"to\": …}}]")
	}
	var out []TierView
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		camp, err := s.campaign(ctx, tx, projectID, campaignID)
		if err != nil {
			return err
		}
		tiers, err := tiersOf(ctx, tx, projectID, camp.ID)
		if err != nil {
			return err
		}
		rules, err := rulesOf(ctx, tx, projectID, camp.ID, "")
		if err != nil {
			return err
		}
		ruleIDs := map[string]bool{}
		for _, r := range rules {
			ruleIDs[r.ID] = true
		}
		rewardIDs, err := assignedRewards(ctx, tx, projectID, camp.ID)
		if err != nil {
			return err
		}
		if len(tiers)+len(rs) > maxTiers {
			return apierr.InvalidPayload(fmt.Sprintf("a campaign has at most %d tiers; it has %d", maxTiers, len(tiers)))
		}
		now := s.Now()
		b := &pgx.Batch{}
		for i, r := range rs {
			at := fmt.Sprintf("[%d]", i)
			if r.Name == nil || strings.TrimSpace(*r.Name) == "" || utf8.RuneCountInString(*r.Name) > 200 {
				return apierr.InvalidPayload(at + ".name is required: 1 to 200 characters")
			}
			if r.Points == nil || r.Points.From == nil || *r.Points.From < 0 {
				return apierr.InvalidPayload(at + ".points.from is required: the lowest balance in the tier, 0 or more")
			}
			if to := r.Points.To; to != nil && *to < *r.Points.From {
				return apierr.InvalidPayload(at + ".points.to must be at least points.from, or absent for no upper bound")
			}
			for id, m := range r.EarningRules {
				if !ruleIDs[id] {
					return apierr.InvalidPayload(fmt.Sprintf("%s.earning_rules: %s is not an earning rule of the campaign", at, id))
				}
				if err := m.check(fmt.Sprintf("%s.earning_rules.%s", at, id)); err != nil {
					return err
				}
			}
			for id, m := range r.Rewards {
				if !rewardIDs[id] {
					return apierr.InvalidPayload(fmt.Sprintf("%s.rewards: %s is not a reward assigned to the campaign", at, id))
				}
				if err := m.check(fmt.Sprintf("%s.rewards.%s", at, id)); err != nil {
					return err
				}
			}
			t := Tier{ID: ids.New("ltr_"), CampaignID: camp.ID, Name: *r.Name, From: *r.Points.From, To: r.Points.To,
				Attrs: TierAttrs{EarningRules: r.EarningRules, Rewards: r.Rewards, Metadata: r.Metadata}, CreatedAt: now}
			for _, o := range tiers {
				if overlap(o, t) {
					return apierr.InvalidPayload(fmt.Sprintf("%s.points overlaps the range of tier %s (%s)", at, o.Name, rangeText(o)))
				}
			}
			tiers = append(tiers, t)
			attrs, err := json.Marshal(t.Attrs)
			if err != nil {
				return err
			}
			b.Queue(`INSERT INTO loyalty_tiers (project_id, `+tierColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL)`,
				projectID, t.ID, t.CampaignID, t.Name, t.From, t.To, attrs, t.CreatedAt)
			out = append(out, t.View())
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return out, err
}

func overlap(a, b Tier) bool {
	aboveA := a.To != nil && b.From > *a.To
	belowA := b.To != nil && *b.To < a.From
	return !aboveA && !belowA
}

func rangeText(t Tier) string {
	if t.To == nil {
		return fmt.Sprintf("%d and up", t.From)
	}
	return fmt.Sprintf("%d to %d", t.From, *t.To)
}

// ListTiers returns a campaign's tiers.
func (s *Service) ListTiers(ctx context.Context, projectID, campaignID, order string, limit int) ([]TierView, int, error) {
	camp, err := s.campaign(ctx, s.pool, projectID, campaignID)
	if err != nil {
		return nil, 0, err
	}
	tiers, err := tiersOf(ctx, s.pool, projectID, camp.ID)
	if err != nil {
		return nil, 0, err
	}
	key := func(t Tier) time.Time { return t.CreatedAt }
	if strings.HasSuffix(order, "updated_at") {
		key = func(t Tier) time.Time {
			if t.UpdatedAt != nil {
				return *t.UpdatedAt
			}
			return t.CreatedAt
		}
	}
	if order != "" {
		desc := strings.HasPrefix(order, "-")
		sort.SliceStable(tiers, func(i, j int) bool {
			if desc {
				return key(tiers[j]).Before(key(tiers[i]))
			}
			return key(tiers[i]).Before(key(tiers[j]))
		})
	}
	total := len(tiers)
	out := make([]TierView, 0, min(limit, total))
	for _, t := range tiers[:min(limit, total)] {
		out = append(out, t.View())
	}
	return out, total, nil
}

// tierRows are a campaign's loyalty tiers.
var tierRows = campaignPart[Tier]{table: "loyalty_tiers", columns: tierColumns, resource: "loyalty_tier", scan: scanTier}

// GetTier returns a tier of a campaign.
func (s *Service) GetTier(ctx context.Context, projectID, campaignID, tierID string) (TierView, error) {
	t, err := tierRows.get(ctx, s, s.pool, projectID, campaignID, tierID, false)
	return t.View(), err
}

// MemberTiers returns the tier the card's balance puts its holder in: a
// list of one, or none.
func (s *Service) MemberTiers(ctx context.Context, projectID, memberID string) ([]TierView, error) {
	c, camp, err := s.card(ctx, s.pool, projectID, "", memberID, false)
	if err != nil {
		return nil, err
	}
	tiers, err := tiersOf(ctx, s.pool, projectID, camp.ID)
	if err != nil {
		return nil, err
	}
	if t := tierOf(tiers, c.Balance); t != nil {
		return []TierView{t.View()}, nil
	}
	return []TierView{}, nil
}

func registerTiers(g *echo.Group, h Handler) {
	g.POST("/loyalties/:campaignId/tiers", h.createTiers)
	g.GET("/loyalties/:campaignId/tiers", h.listTiers)
	g.GET("/loyalties/:campaignId/tiers/:tierId", h.getTier)
	g.GET("/loyalties/members/:memberId/tiers", h.memberTiers)
}

func (h Handler) createTiers(c echo.Context) error {
	return httpx.WithBody(c, func(rs []TierRequest) (any, error) {
		return h.svc.CreateTiers(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), rs)
	})
}

func (h Handler) listTiers(c echo.Context) error {
	lq, err := listq.Parse(c.QueryParams(), listq.Spec{Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at"},
		NaturalOrder: true, Pages: true})
	if err != nil {
		return err
	}
	vs, total, err := h.svc.ListTiers(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), lq.Order, lq.Limit)
	if err != nil {
		return err
	}
	// The first page only (no cursor): has_more says whether it is all.
	return c.JSON(http.StatusOK, listq.List[TierView]{Data: vs, Total: &total, More: total > len(vs)})
}

func (h Handler) getTier(c echo.Context) error {
	return httpx.Reply(c)(h.svc.GetTier(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), c.Param("tierId")))
}

func (h Handler) memberTiers(c echo.Context) error {
	vs, err := h.svc.MemberTiers(c.Request().Context(), httpx.ProjectID(c), c.Param("memberId"))
	if err != nil {
		return err
	}
	n := len(vs)
	return c.JSON(http.StatusOK, listq.List[TierView]{Data: vs, Total: &n})
}
