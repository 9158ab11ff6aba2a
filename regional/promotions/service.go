package promotions

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/engine"
	"github.com/tallyhq/tally/regional/engine/stacked"
	"github.com/tallyhq/tally/regional/qualifications"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Service is the promotion tiers' and stacks' service.
type Service struct {
	pool  *db.Pool
	camps *campaigns.Service // the campaigns' rows and their notices
	rules *validation.Service
	meta  MetadataSchemas
	clock *clock.Clock
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// NewService returns the service.
func NewService(pool *db.Pool, camps *campaigns.Service, rules *validation.Service, meta MetadataSchemas, clk *clock.Clock) *Service {
	return &Service{pool: pool, camps: camps, rules: rules, meta: meta, clock: clk}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

const tierColumns = `id, campaign_id, name, active, hierarchy, attrs, created_at, updated_at`

func scanTier(r pgx.Row) (Tier, error) {
	var t Tier
	var attrs []byte
	if err := r.Scan(&t.ID, &t.CampaignID, &t.Name, &t.Active, &t.Hierarchy, &attrs, &t.CreatedAt, &t.UpdatedAt); err != nil {
		return Tier{}, err
	}
	return t, json.Unmarshal(attrs, &t.Attrs)
}

// liveTiers is the FROM and WHERE of the tiers of live campaigns.
const liveTiers = ` FROM promotion_tiers WHERE project_id = $1
	AND campaign_id IN ` + campaigns.LiveIDs

// available holds of the active tiers of active campaigns.
const available = `active AND campaign_id IN ` + campaigns.ActiveIDs

func (s *Service) tier(ctx context.Context, q db.Querier, projectID, id string, lock bool) (Tier, error) {
	t, err := scanTier(q.QueryRow(ctx, `SELECT `+tierColumns+liveTiers+` AND id = $2`+db.ForUpdate(lock), projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return Tier{}, apierr.NotFound("promotion_tier", id)
	}
	return t, err
}

func writeTier(ctx context.Context, q db.Querier, projectID string, t Tier, insert bool) error {
	attrs, err := json.Marshal(t.Attrs)
	if err != nil {
		return err
	}
	if insert {
		_, err = q.Exec(ctx, `INSERT INTO promotion_tiers (project_id, `+tierColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			projectID, t.ID, t.CampaignID, t.Name, t.Active, t.Hierarchy, attrs, t.CreatedAt, t.UpdatedAt)
		return err
	}
	_, err = q.Exec(ctx, `UPDATE promotion_tiers SET name = $3, active = $4, hierarchy = $5, attrs = $6, updated_at = $7
		WHERE project_id = $1 AND id = $2`, projectID, t.ID, t.Name, t.Active, t.Hierarchy, attrs, t.UpdatedAt)
	return err
}

// promotion reads a live PROMOTION campaign by id or name.
func promotion(ctx context.Context, q db.Querier, projectID, idOrName string, lock bool) (campaigns.Campaign[json.RawMessage], error) {
	c, err := campaigns.Get[json.RawMessage](ctx, q, projectID, idOrName, lock, "PROMOTION")
	if errors.Is(err, db.ErrNotFound) {
		return c, apierr.NotFound("campaign", idOrName)
	}
	return c, err
}

// views renders tiers with their campaigns, rule assignments and summaries.
func (s *Service) views(ctx context.Context, q db.Querier, projectID string, ts []Tier) ([]TierView, error) {
	out := make([]TierView, 0, len(ts))
	if len(ts) == 0 {
		return out, nil
	}
	var tierIDs, campaignIDs []string
	for _, t := range ts {
		tierIDs, campaignIDs = append(tierIDs, t.ID), append(campaignIDs, t.CampaignID)
	}
	ks, err := campaigns.WindowsByID(ctx, q, projectID, campaignIDs)
	if err != nil {
		return nil, err
	}
	as, err := validation.AssignmentsOf(ctx, q, projectID, tierIDs)
	if err != nil {
		return nil, err
	}
	// The tiers' redemption counts are the stacked redemptions' owner's.
	sums, err := stacked.SummarizeTiers(ctx, q, projectID, tierIDs)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		var sum Summary
		x := sums[t.ID]
		sum.Redemptions.TotalRedeemed, sum.Orders.TotalAmount, sum.Orders.TotalDiscountAmount = x.Redeemed, x.OrdersAmount, x.DiscountAmount
		out = append(out, t.view(ks[t.CampaignID], as[t.ID], sum))
	}
	return out, nil
}

// addTiers writes new tiers of campaign campaignID in tx, with their rule
// assignments; hierarchies not given follow the campaign's last.
func (s *Service) addTiers(ctx context.Context, tx pgx.Tx, projectID, campaignID string, rs []TierRequest) ([]Tier, error) {
	var last int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(max(hierarchy), 0) FROM promotion_tiers WHERE project_id = $1 AND campaign_id = $2`,
		projectID, campaignID).Scan(&last); err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]Tier, 0, len(rs))
	for _, r := range rs {
		t := Tier{ID: ids.New("promo_"), CampaignID: campaignID, Active: true, CreatedAt: now}
		if err := r.apply(&t, true); err != nil {
			return nil, err
		}
		if err := s.meta.CheckMetadata(ctx, projectID, "promotion_tier", t.Attrs.Metadata); err != nil {
			return nil, err
		}
		if r.Hierarchy == nil {
			last++
			t.Hierarchy = last
		}
		last = max(last, t.Hierarchy)
		if err := writeTier(ctx, tx, projectID, t, true); err != nil {
			return nil, err
		}
		if _, err := s.rules.AssignIn(ctx, tx, projectID, validation.Object{Type: "promotion_tier", ID: t.ID}, r.ValidationRules); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// CampaignRequest is the body of POST /v1/campaigns for a PROMOTION.
type CampaignRequest struct {
	campaigns.CommonUpdate
	Name      *string `json:"name"`
	Promotion *struct {
		Tiers []TierRequest `json:"tiers"`
	} `json:"promotion"`
}

// CreateCampaign creates a PROMOTION campaign with its tiers (POST
// /v1/campaigns), in one transaction.
func (s *Service) CreateCampaign(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
	var r CampaignRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, apierr.InvalidPayload("the campaign does not read: " + err.Error())
	}
	if r.Name == nil || strings.TrimSpace(*r.Name) == "" || len(*r.Name) > 200 {
		return nil, apierr.InvalidPayload("name is required: 1 to 200 characters")
	}
	if r.Promotion == nil || len(r.Promotion.Tiers) == 0 {
		return nil, apierr.InvalidPayload("promotion.tiers is required: a PROMOTION campaign has at least one tier")
	}
	if len(r.Promotion.Tiers) > 100 {
		return nil, apierr.InvalidPayload("promotion.tiers: at most 100 in one request")
	}
	if err := campaigns.CheckValidity(r.ValidityTimeframe, r.ValidityDayOfWeek, r.ValidityHours); err != nil {
		return nil, err
	}
	c := campaigns.Campaign[json.RawMessage]{ID: ids.New("camp_"), Name: *r.Name, CampaignType: "PROMOTION",
		GenerationStatus: "DONE", CreatedAt: s.now()}
	c.Attrs.Type, c.Attrs.Active = "AUTO_UPDATE", true
	if err := campaigns.ApplyCommon(&c.Attrs, r.CommonUpdate); err != nil {
		return nil, err
	}
	var tiers []Tier
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := campaigns.Insert(ctx, s.camps, tx, projectID, &c, r.Category, r.CategoryID); err != nil {
			return err
		}
		var err error
		if tiers, err = s.addTiers(ctx, tx, projectID, c.ID, r.Promotion.Tiers); err != nil {
			return err
		}
		return s.camps.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: campaigns.EventCreated, Entity: c.ID, Object: c.ViewOf()})
	})
	if err != nil {
		return nil, err
	}
	return s.campaignView(ctx, projectID, c, tiers)
}

// campaignView is a PROMOTION campaign's view with its tiers.
func (s *Service) campaignView(ctx context.Context, projectID string, c campaigns.Campaign[json.RawMessage], ts []Tier) (any, error) {
	vs, err := s.views(ctx, s.pool, projectID, ts)
	if err != nil {
		return nil, err
	}
	v := c.ViewOf()
	v.Promotion, _ = json.Marshal(map[string]any{"object": "list", "data_ref": "tiers", "tiers": vs, "total": len(vs), "has_more": false})
	return v, nil
}

// GetCampaign is a PROMOTION campaign with its tiers.
func (s *Service) GetCampaign(ctx context.Context, projectID, id string) (any, error) {
	c, err := promotion(ctx, s.pool, projectID, id, false)
	if err != nil {
		return nil, err
	}
	return s.readView(ctx, projectID, c)
}

// readView is c's view with its tiers as they are now.
func (s *Service) readView(ctx context.Context, projectID string, c campaigns.Campaign[json.RawMessage]) (any, error) {
	ts, err := s.campaignTiers(ctx, s.pool, projectID, c.ID)
	if err != nil {
		return nil, err
	}
	return s.campaignView(ctx, projectID, c, ts)
}

// UpdateCampaign changes a PROMOTION campaign's common properties.
func (s *Service) UpdateCampaign(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error) {
	var r campaigns.CommonUpdate
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, apierr.InvalidPayload("the campaign does not read: " + err.Error())
	}
	c, err := campaigns.Change(ctx, s.camps, projectID, id, campaigns.EventUpdated, []string{"PROMOTION"},
		func(_ pgx.Tx, c *campaigns.Campaign[json.RawMessage]) error {
			return campaigns.ApplyCommon(&c.Attrs, r)
		})
	if err != nil {
		return nil, err
	}
	return s.readView(ctx, projectID, c)
}

func (s *Service) campaignTiers(ctx context.Context, q db.Querier, projectID, campaignID string) ([]Tier, error) {
	return db.Collect(scanTier)(q.Query(ctx, `SELECT `+tierColumns+` FROM promotion_tiers
		WHERE project_id = $1 AND campaign_id = $2 ORDER BY hierarchy, id`, projectID, campaignID))
}

// DropCampaignTiers deletes a deleted campaign's tiers, stacks and their
// rule assignments (CAMPAIGN.VOUCHERS_DELETE's part for promotions).
func (s *Service) DropCampaignTiers(ctx context.Context, projectID, campaignID string) (int64, error) {
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		ts, err := s.campaignTiers(ctx, tx, projectID, campaignID)
		if err != nil || len(ts) == 0 {
			return err
		}
		var idsOf []string
		for _, t := range ts {
			idsOf = append(idsOf, t.ID)
		}
		if err := validation.DropAssignmentsIn(ctx, tx, projectID, idsOf); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM promotion_tiers WHERE project_id = $1 AND campaign_id = $2`, projectID, campaignID)
		b.Queue(`DELETE FROM promotion_stacks WHERE project_id = $1 AND campaign_id = $2`, projectID, campaignID)
		return tx.SendBatch(ctx, b).Close()
	})
	return 0, err // tiers are not vouchers: the action counts none
}

// AddTiers is POST /v1/promotions/{campaignId}/tiers: one tier.
func (s *Service) AddTier(ctx context.Context, projectID, campaignID string, r TierRequest) (TierView, error) {
	var t Tier
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) (err error) {
		t, err = s.addTierIn(ctx, tx, projectID, campaignID, r)
		return err
	})
	if err != nil {
		return TierView{}, err
	}
	return s.one(ctx, projectID, t)
}

// AddTierIn adds one tier to a promotion campaign in the caller's
// transaction and answers its id, to be read (GetTier) once that commits:
// a tier set up from a template is written with what the template
// carries and its rules' copies (regional/templates).
func (s *Service) AddTierIn(ctx context.Context, tx pgx.Tx, projectID, campaignID string, r TierRequest) (string, error) {
	t, err := s.addTierIn(ctx, tx, projectID, campaignID, r)
	return t.ID, err
}

func (s *Service) addTierIn(ctx context.Context, tx pgx.Tx, projectID, campaignID string, r TierRequest) (Tier, error) {
	c, err := promotion(ctx, tx, projectID, campaignID, true)
	if err != nil {
		return Tier{}, err
	}
	t, err := s.addTiers(ctx, tx, projectID, c.ID, []TierRequest{r})
	if err != nil {
		return Tier{}, err
	}
	return t[0], nil
}

func (s *Service) one(ctx context.Context, projectID string, t Tier) (TierView, error) {
	vs, err := s.views(ctx, s.pool, projectID, []Tier{t})
	if err != nil {
		return TierView{}, err
	}
	return vs[0], nil
}

// GetTier reads a tier.
func (s *Service) GetTier(ctx context.Context, projectID, id string) (TierView, error) {
	t, err := s.tier(ctx, s.pool, projectID, id, false)
	if err != nil {
		return TierView{}, err
	}
	return s.one(ctx, projectID, t)
}

// UpdateTier changes a tier's properties; enabling and disabling are
// updates of active.
func (s *Service) UpdateTier(ctx context.Context, projectID, id string, r TierRequest) (TierView, error) {
	if len(r.ValidationRules) > 0 {
		return TierView{}, apierr.InvalidPayload("validation_rules: assign rules to an existing tier with POST /v1/validation-rules/{id}/assignments")
	}
	var t Tier
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if t, err = s.tier(ctx, tx, projectID, id, true); err != nil {
			return err
		}
		if err := r.apply(&t, false); err != nil {
			return err
		}
		if present(r.Metadata) { // replaced whole when sent
			if err := s.meta.CheckMetadata(ctx, projectID, "promotion_tier", t.Attrs.Metadata); err != nil {
				return err
			}
		}
		now := s.now()
		t.UpdatedAt = &now
		return writeTier(ctx, tx, projectID, t, false)
	})
	if err != nil {
		return TierView{}, err
	}
	return s.one(ctx, projectID, t)
}

// DeleteTier deletes a tier and its rule assignments.
func (s *Service) DeleteTier(ctx context.Context, projectID, id string) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := s.tier(ctx, tx, projectID, id, true); err != nil {
			return err
		}
		if err := validation.DropAssignmentsIn(ctx, tx, projectID, []string{id}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM promotion_tiers WHERE project_id = $1 AND id = $2`, projectID, id)
		return err
	})
}

// ListTiers lists tiers, of one campaign or of all, by hierarchy then
// creation, with is_available (active tiers of active campaigns) when asked.
func (s *Service) ListTiers(ctx context.Context, projectID, campaignID string, isAvailable *bool, lq listq.Query) ([]TierView, int, bool, string, error) {
	cond, args := "", []any{projectID}
	if campaignID != "" {
		c, err := promotion(ctx, s.pool, projectID, campaignID, false)
		if err != nil {
			return nil, 0, false, "", err
		}
		args = append(args, c.ID)
		cond += " AND campaign_id = $2"
	}
	if isAvailable != nil {
		cond += map[bool]string{true: " AND " + available, false: " AND NOT (" + available + ")"}[*isAvailable]
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*)`+liveTiers+cond, args...).Scan(&total); err != nil {
		return nil, 0, false, "", err
	}
	args = append(args, lq.Limit+1)
	limit := "$" + strconv.Itoa(len(args))
	keyset, orderBy, args := lq.Keyset("promotion_tiers", "hierarchy", args)
	ts, err := db.Collect(scanTier)(s.pool.Query(ctx, `SELECT `+tierColumns+liveTiers+cond+keyset+` ORDER BY `+orderBy+` LIMIT `+limit+lq.OffsetSQL(), args...))
	if err != nil {
		return nil, 0, false, "", err
	}
	more, next := len(ts) > lq.Limit, ""
	if more {
		ts = ts[:lq.Limit]
		next = ts[len(ts)-1].ID
	}
	vs, err := s.views(ctx, s.pool, projectID, ts)
	return vs, total, more, next, err
}

// The promotion engine's reads (engine.Tiers) and qualifications'
// (qualifications.Tiers).

func engineTier(t Tier) engine.Tier {
	a := t.Attrs
	created := t.CreatedAt
	cat := ""
	if a.CategoryID != nil {
		cat = *a.CategoryID
	}
	return engine.Tier{ID: t.ID, Name: t.Name, Banner: a.Banner, CampaignID: t.CampaignID, Discount: a.Discount, Hierarchy: int(t.Hierarchy), CategoryID: cat,
		Metadata: a.Metadata, CreatedAt: &created, Window: engine.Window{Active: t.Active, StartDate: a.StartDate,
			ExpirationDate: a.ExpirationDate, ValidityTimeframe: a.ValidityTimeframe, ValidityDayOfWeek: a.ValidityDayOfWeek,
			ValidityHours: a.ValidityHours}}
}

// QueueTiersByID queues into b the read of tiers of live campaigns by id,
// into out (engine.Tiers): in the batch of a request's other redeemables.
func (s *Service) QueueTiersByID(b *pgx.Batch, projectID string, idsOf []string, out map[string]engine.Tier) {
	b.Queue(`SELECT `+tierColumns+liveTiers+` AND id = ANY($2::TEXT[])`, projectID, idsOf).Query(func(rows pgx.Rows) error {
		ts, err := db.Collect(scanTier)(rows, nil)
		for _, t := range ts {
			out[t.ID] = engineTier(t)
		}
		return err
	})
}

// StackTiers reads a promotion stack's tiers, in its order (engine.Tiers).
func (s *Service) StackTiers(ctx context.Context, q db.Querier, projectID, stackID string) ([]string, error) {
	var raw []byte
	err := q.QueryRow(ctx, `SELECT attrs FROM promotion_stacks WHERE project_id = $1 AND id = $2`, projectID, stackID).Scan(&raw)
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("promotion_stack", stackID)
	}
	if err != nil {
		return nil, err
	}
	var a stackAttrs
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	return liveIDs(ctx, q, projectID, a.IDs)
}

// liveIDs are those of ids that name tiers still there, in their order: a
// deleted tier leaves the stacks that named it.
func liveIDs(ctx context.Context, q db.Querier, projectID string, ids []string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM promotion_tiers WHERE project_id = $1 AND id = ANY($2::TEXT[])`, projectID, ids)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { live[id] = true; return nil }); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ids))
	for _, x := range ids {
		if live[x] {
			out = append(out, x)
		}
	}
	return out, nil
}

// Stacks reads the project's promotion stacks (qualifications.Tiers).
func (s *Service) Stacks(ctx context.Context, q db.Querier, projectID string) ([]qualifications.Stack, error) {
	stacks, err := db.Collect(func(r pgx.Row) (qualifications.Stack, error) {
		var st qualifications.Stack
		var raw []byte
		if err := r.Scan(&st.ID, &st.CampaignID, &st.Name, &raw, &st.CreatedAt); err != nil {
			return st, err
		}
		var a stackAttrs
		err := json.Unmarshal(raw, &a)
		st.TierIDs = a.IDs
		return st, err
	})(q.Query(ctx, `SELECT id, campaign_id, name, attrs, created_at FROM promotion_stacks WHERE project_id = $1 ORDER BY id`, projectID))
	if err != nil {
		return nil, err
	}
	for i := range stacks {
		if stacks[i].TierIDs, err = liveIDs(ctx, q, projectID, stacks[i].TierIDs); err != nil {
			return nil, err
		}
	}
	return stacks, nil
}

// ActiveTiers reads the active tiers of live campaigns (qualifications.Tiers).
func (s *Service) ActiveTiers(ctx context.Context, q db.Querier, projectID string) ([]engine.Tier, error) {
	ts, err := db.Collect(scanTier)(q.Query(ctx, `SELECT `+tierColumns+liveTiers+` AND active ORDER BY id`, projectID))
	out := make([]engine.Tier, len(ts))
	for i, t := range ts {
		out[i] = engineTier(t)
	}
	return out, err
}
