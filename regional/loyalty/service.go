package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/telemetry"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/orders"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/loyalty")

// Events records webhook events in the writer's transaction.
type Events interface {
	Emit(ctx context.Context, tx db.Querier, projectID, eventType, entityID string, object any) error
	// Queue is Emit for a transaction sent in batches (db.InPipe).
	Queue(ctx context.Context, b *pgx.Batch, projectID, eventType, entityID string, object any) error
}

// Service holds the rules of loyalty programs and the points ledger.
type Service struct {
	pool      *db.Pool
	events    Events
	customers *customers.Service
	orders    *orders.Service
	attrs     attrsCache
	clock     *clock.Clock
}

// Now is the service's time: the platform clock, which tests move.
func (s *Service) Now() time.Time { return s.clock.Now() }

// NewService returns the loyalty service and registers its jobs in reg.
func NewService(pool *db.Pool, events Events, cust *customers.Service, ord *orders.Service, reg *async.Registry, clk *clock.Clock) *Service {
	s := &Service{pool: pool, events: events, customers: cust, orders: ord, attrs: newAttrsCache(10_000), clock: clk}
	reg.HandleJob(GenerateJob, s.generateJob)
	reg.HandleJob(DeleteJob, s.deleteJob)
	// An accrual locks its customer's cards, in card id order.
	reg.HandleTx(orders.KindPaid, s.accrue, async.Policy{MaxAttempts: 50, ReadCommitted: true, LockOrder: func(t async.Task) string {
		var task orders.PaidTask
		_ = json.Unmarshal(t.Payload, &task)
		return task.CustomerID
	}})
	return s
}

func notFoundCampaign(id string) error { return apierr.NotFound("campaign", id) }
func notFoundCard(id string) error     { return apierr.NotFound("voucher", id) }

// campaign loads a live campaign or answers 404.
func (s *Service) campaign(ctx context.Context, q db.Querier, projectID, idOrName string) (Campaign, error) {
	c, err := getCampaign(ctx, q, projectID, idOrName)
	if errors.Is(err, db.ErrNotFound) {
		return Campaign{}, notFoundCampaign(idOrName)
	}
	return c, err
}

// card loads a card of a live campaign (campaignID, when given, must be
// its campaign) or answers 404.
func (s *Service) card(ctx context.Context, q db.Querier, projectID, campaignID, memberID string, lock bool) (Card, Campaign, error) {
	var camp Campaign
	var err error
	if campaignID != "" {
		if camp, err = s.campaign(ctx, q, projectID, campaignID); err != nil {
			return Card{}, Campaign{}, err
		}
	}
	c, err := getCard(ctx, q, projectID, memberID, lock)
	if errors.Is(err, db.ErrNotFound) {
		return Card{}, Campaign{}, notFoundCard(memberID)
	}
	if err != nil {
		return Card{}, Campaign{}, err
	}
	if campaignID != "" {
		if c.CampaignID != camp.ID {
			return Card{}, Campaign{}, notFoundCard(memberID)
		}
		return c, camp, nil
	}
	camp, err = getCampaign(ctx, q, projectID, c.CampaignID)
	if errors.Is(err, db.ErrNotFound) { // its campaign was deleted
		return Card{}, Campaign{}, notFoundCard(memberID)
	}
	return c, camp, err
}

// CreateRequest is the body of POST /v1/loyalties.
type CreateRequest struct {
	Name                            *string         `json:"name"`
	Description                     *string         `json:"description"`
	Type                            *string         `json:"type"`
	CampaignType                    *string         `json:"campaign_type"`
	VouchersCount                   *int64          `json:"vouchers_count"`
	Voucher                         *voucherRequest `json:"voucher"`
	AutoJoin                        *bool           `json:"auto_join"`
	JoinOnce                        *bool           `json:"join_once"`
	UseVoucherMetadataSchema        *bool           `json:"use_voucher_metadata_schema"`
	ValidityTimeframe               json.RawMessage `json:"validity_timeframe"`
	ValidityDayOfWeek               json.RawMessage `json:"validity_day_of_week"`
	ValidityHours                   json.RawMessage `json:"validity_hours"`
	ActivityDurationAfterPublishing *string         `json:"activity_duration_after_publishing"`
	StartDate                       *time.Time      `json:"start_date"`
	ExpirationDate                  *time.Time      `json:"expiration_date"`
	Metadata                        map[string]any  `json:"metadata"`
	Category                        *string         `json:"category"`
	CategoryID                      *string         `json:"category_id"`
}

type voucherRequest struct {
	Type        *string        `json:"type"`
	LoyaltyCard *cardRequest   `json:"loyalty_card"`
	Redemption  map[string]any `json:"redemption"`
	CodeConfig  *CodeConfig    `json:"code_config"`
}

type cardRequest struct {
	Points          *int64           `json:"points"`
	ExpirationRules *ExpirationRules `json:"expiration_rules"`
}

func checkRules(r *ExpirationRules) error {
	if r == nil {
		return nil
	}
	switch r.PeriodType {
	case "MONTH":
		if r.PeriodValue < 1 || r.PeriodValue > 1200 {
			return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules.period_value must be from 1 to 1200 months")
		}
	case "FIXED_DAY_OF_YEAR":
		if r.FixedMonth < 1 || r.FixedMonth > 12 || r.FixedDay < 1 || r.FixedDay > 31 {
			return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules needs fixed_month 1-12 and fixed_day 1-31")
		}
	default:
		return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules.period_type must be MONTH or FIXED_DAY_OF_YEAR")
	}
	switch r.RoundingType {
	case "", "END_OF_MONTH", "END_OF_QUARTER", "END_OF_HALF_YEAR", "END_OF_YEAR":
	case "PARTICULAR_MONTH":
		if r.RoundingValue < 1 || r.RoundingValue > 12 {
			return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules.rounding_value must be a month, 1-12")
		}
	default:
		return apierr.InvalidPayload("voucher.loyalty_card.expiration_rules.rounding_type is not one of END_OF_MONTH, END_OF_QUARTER, END_OF_HALF_YEAR, END_OF_YEAR, PARTICULAR_MONTH")
	}
	return nil
}

// expiry is when points added now expire under the rules (nil: never).
func (r *ExpirationRules) expiry(now time.Time) *time.Time {
	if r == nil {
		return nil
	}
	d := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	switch r.PeriodType {
	case "MONTH":
		d = d.AddDate(0, r.PeriodValue, 0)
	case "FIXED_DAY_OF_YEAR":
		f := time.Date(d.Year(), time.Month(r.FixedMonth), r.FixedDay, 0, 0, 0, 0, time.UTC)
		if !f.After(d) {
			f = f.AddDate(1, 0, 0)
		}
		d = f
	}
	endOf := func(months int) time.Time { // last day of the period of `months` months holding d
		m := (int(d.Month())-1)/months*months + months
		return time.Date(d.Year(), time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC)
	}
	switch r.RoundingType {
	case "END_OF_MONTH":
		d = endOf(1)
	case "END_OF_QUARTER":
		d = endOf(3)
	case "END_OF_HALF_YEAR":
		d = endOf(6)
	case "END_OF_YEAR":
		d = endOf(12)
	case "PARTICULAR_MONTH":
		e := time.Date(d.Year(), time.Month(r.RoundingValue)+1, 0, 0, 0, 0, 0, time.UTC)
		if e.Before(d) {
			e = time.Date(d.Year()+1, time.Month(r.RoundingValue)+1, 0, 0, 0, 0, 0, time.UTC)
		}
		d = e
	}
	return &d
}

const maxCards = 1_000_000

// CreateCampaign creates a loyalty program and its cards: one in the
// request, more by the CAMPAIGN.VOUCHERS_GENERATE async action.
func (s *Service) CreateCampaign(ctx context.Context, projectID string, r CreateRequest) (_ CampaignView, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.CreateCampaign")
	defer telemetry.End(span, &err)
	if r.Name == nil || strings.TrimSpace(*r.Name) == "" {
		return CampaignView{}, apierr.InvalidPayload("name is required")
	}
	if len(*r.Name) > 200 {
		return CampaignView{}, apierr.InvalidPayload("name is at most 200 characters")
	}
	if r.CampaignType != nil && *r.CampaignType != "LOYALTY_PROGRAM" {
		return CampaignView{}, apierr.InvalidPayload("campaign_type must be LOYALTY_PROGRAM")
	}
	a := Attrs{Type: "AUTO_UPDATE", JoinOnce: true, Active: true, Description: r.Description, Metadata: r.Metadata,
		ValidityTimeframe: r.ValidityTimeframe, ValidityDayOfWeek: r.ValidityDayOfWeek, ValidityHours: r.ValidityHours,
		ActivityDurationAfterPublishing: r.ActivityDurationAfterPublishing, StartDate: r.StartDate,
		ExpirationDate: r.ExpirationDate, Category: r.Category, CategoryID: r.CategoryID,
		Voucher: VoucherConfig{Type: "LOYALTY_CARD", Redemption: map[string]any{"quantity": nil}}}
	if r.Type != nil {
		if *r.Type != "AUTO_UPDATE" && *r.Type != "STATIC" {
			return CampaignView{}, apierr.InvalidPayload("type must be AUTO_UPDATE or STATIC")
		}
		a.Type = *r.Type
	}
	if r.AutoJoin != nil {
		a.AutoJoin = *r.AutoJoin
	}
	if r.JoinOnce != nil && !*r.JoinOnce {
		return CampaignView{}, apierr.InvalidPayload("join_once is always true for loyalty campaigns")
	}
	if r.UseVoucherMetadataSchema != nil {
		a.UseVoucherMetadataSchema = *r.UseVoucherMetadataSchema
	}
	if a.StartDate != nil && a.ExpirationDate != nil && !a.ExpirationDate.After(*a.StartDate) {
		return CampaignView{}, apierr.InvalidPayload("expiration_date must be after start_date")
	}
	if v := r.Voucher; v != nil {
		if v.Type != nil && *v.Type != "LOYALTY_CARD" {
			return CampaignView{}, apierr.InvalidPayload("voucher.type must be LOYALTY_CARD")
		}
		if v.LoyaltyCard != nil {
			if p := v.LoyaltyCard.Points; p != nil {
				if *p < 0 || *p > 1_000_000_000 {
					return CampaignView{}, apierr.InvalidPayload("voucher.loyalty_card.points must be from 0 to 1000000000")
				}
				a.Voucher.LoyaltyCard.Points = *p
			}
			if err := checkRules(v.LoyaltyCard.ExpirationRules); err != nil {
				return CampaignView{}, err
			}
			a.Voucher.LoyaltyCard.ExpirationRules = v.LoyaltyCard.ExpirationRules
		}
		if v.Redemption != nil {
			a.Voucher.Redemption = v.Redemption
		}
		if v.CodeConfig != nil {
			a.Voucher.CodeConfig = *v.CodeConfig
		}
	}
	gen, err := newGenerator(a.Voucher.CodeConfig)
	if err != nil {
		return CampaignView{}, err
	}
	var count int64
	if r.VouchersCount != nil {
		count = *r.VouchersCount
	}
	if count < 0 || count > maxCards {
		return CampaignView{}, apierr.InvalidPayload(fmt.Sprintf("vouchers_count must be from 0 to %d", maxCards))
	}
	if err := gen.check(count); err != nil {
		return CampaignView{}, err
	}
	now := s.Now()
	c := Campaign{ID: ids.New("camp_"), Name: *r.Name, Attrs: a, VouchersCount: count, GenerationStatus: "DONE", CreatedAt: now}
	var actionID *string
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c.GenerationStatus, actionID = "DONE", nil
		if count > 1 {
			c.GenerationStatus = "IN_PROGRESS"
		}
		if err := insertCampaign(ctx, tx, projectID, c); err != nil {
			return err
		}
		if count == 1 {
			if _, err := s.generate(ctx, tx, projectID, c, gen, 1, now); err != nil {
				return err
			}
		} else if count > 1 {
			act, err := async.StartJob(ctx, tx, projectID, GenerateJob, generateParams{CampaignID: c.ID})
			if err != nil {
				return err
			}
			actionID = &act.ID
		}
		return s.events.Emit(ctx, tx, projectID, EventCampaignCreated, c.ID, c.View())
	})
	if errors.Is(err, db.ErrConflict) {
		return CampaignView{}, apierr.Duplicate("campaign", fmt.Sprintf("A campaign named %q already exists.", c.Name))
	}
	if err != nil {
		return CampaignView{}, err
	}
	v := c.View()
	v.AsyncActionID = actionID
	return v, nil
}

type generateParams struct {
	CampaignID string `json:"campaign_id"`
}

// generate makes n cards of a campaign in q, in chunks, regenerating the
// codes that collide with existing ones. It returns how many it made.
func (s *Service) generate(ctx context.Context, q db.Querier, projectID string, c Campaign, gen generator, n int64, now time.Time) (int64, error) {
	var made int64
	for tries := 0; made < n; tries++ {
		if tries > 50 {
			return made, errors.New("loyalty: code space too crowded to generate cards")
		}
		chunk := min(n-made, 5000)
		codes := make([]string, chunk)
		for i := range codes {
			codes[i] = gen.next()
		}
		cardIDs := make([]string, chunk)
		for i := range cardIDs {
			cardIDs[i] = ids.New("v_")
		}
		rows, err := q.Query(ctx, `INSERT INTO loyalty_cards (project_id, id, code, campaign_id, created_at)
			SELECT $1, v.id, v.code, $2, $3 FROM unnest($4::TEXT[], $5::TEXT[]) AS v(id, code)
			ON CONFLICT (project_id, code) DO NOTHING RETURNING id`, projectID, c.ID, now, cardIDs, codes)
		if err != nil {
			return made, err
		}
		inserted, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return made, err
		}
		if p := c.Attrs.Voucher.LoyaltyCard.Points; p > 0 && len(inserted) > 0 {
			if err := s.initialPoints(ctx, q, projectID, c, inserted, p, now); err != nil {
				return made, err
			}
		}
		made += int64(len(inserted))
	}
	return made, nil
}

// initialPoints gives new cards the campaign's starting points, each with
// its POINTS_ADDITION, so that balances stay the sum of their transactions.
func (s *Service) initialPoints(ctx context.Context, q db.Querier, projectID string, c Campaign, cardIDs []string, points int64, now time.Time) error {
	exp := c.Attrs.Voucher.LoyaltyCard.ExpirationRules.expiry(now)
	txIDs, details := make([]string, len(cardIDs)), make([]string, len(cardIDs))
	for i, id := range cardIDs {
		txIDs[i] = ids.New("vtx_")
		card := Card{ID: id, Points: points, Balance: points}
		d, _ := json.Marshal(map[string]any{"balance": card.balance(points)})
		details[i] = string(d)
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE loyalty_cards SET points = $3::INT8, balance = $3::INT8, next_expiration_date = $4::DATE,
		next_expiration_points = CASE WHEN $4::DATE IS NULL THEN NULL ELSE $3::INT8 END
		WHERE project_id = $1 AND id = ANY($2::TEXT[])`, projectID, cardIDs, points, exp)
	b.Queue(`INSERT INTO loyalty_point_buckets (project_id, card_id, id, points, expires_on)
		SELECT $1, v.card, $3, $4, $5 FROM unnest($2::TEXT[]) AS v(card)`, projectID, cardIDs, bucketID(exp), points, exp)
	b.Queue(`INSERT INTO loyalty_transactions (project_id, id, card_id, campaign_id, type, delta, source, reason, details, created_at)
		SELECT $1, v.id, v.card, $4, 'POINTS_ADDITION', $5, 'API', 'initial points', v.details::JSONB, $6
		FROM unnest($2::TEXT[], $3::TEXT[], $7::TEXT[]) AS v(card, id, details)`,
		projectID, cardIDs, txIDs, c.ID, points, now, details)
	return q.SendBatch(ctx, b).Close()
}

// generateJob is CAMPAIGN.VOUCHERS_GENERATE: it makes the cards the
// campaign still lacks (a rerun after a crash makes only the rest).
func (s *Service) generateJob(ctx context.Context, job *async.Job) (any, error) {
	var p generateParams
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return nil, err
	}
	c, err := getCampaign(ctx, s.pool, job.ProjectID, p.CampaignID)
	if errors.Is(err, db.ErrNotFound) {
		return map[string]any{"message": "the campaign was deleted"}, nil
	}
	if err != nil {
		return nil, err
	}
	gen, err := newGenerator(c.Attrs.Voucher.CodeConfig)
	if err != nil {
		return nil, err
	}
	var have int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2`,
		job.ProjectID, c.ID).Scan(&have); err != nil {
		return nil, err
	}
	now := s.Now()
	for have < c.VouchersCount {
		n := min(c.VouchersCount-have, 10000)
		var made int64
		err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			made, err = s.generate(ctx, tx, job.ProjectID, c, gen, n, now)
			return err
		})
		if err != nil {
			return nil, err
		}
		have += made
		if err := job.Progress(ctx, int(have*100/c.VouchersCount)); err != nil {
			return nil, err
		}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE loyalty_campaigns SET generation_status = 'DONE' WHERE project_id = $1 AND id = $2`,
		job.ProjectID, c.ID); err != nil {
		return nil, err
	}
	return map[string]any{"campaign_id": c.ID, "vouchers_count": have}, nil
}

// GetCampaign returns a campaign by id or name.
func (s *Service) GetCampaign(ctx context.Context, projectID, idOrName string) (CampaignView, error) {
	c, err := s.campaign(ctx, s.pool, projectID, idOrName)
	if err != nil {
		return CampaignView{}, err
	}
	return c.View(), nil
}

// ListCampaigns returns a page of campaigns in id (creation) order.
func (s *Service) ListCampaigns(ctx context.Context, projectID string, lq listq.Query) ([]CampaignView, int, bool, string, error) {
	cs, total, err := listCampaigns(ctx, s.pool, projectID, lq)
	if err != nil {
		return nil, 0, false, "", err
	}
	out, more, next := listq.PageOf(cs, lq.Limit, func(c Campaign) string { return c.ID }, Campaign.View)
	return out, total, more, next, nil
}

// UpdateRequest is the body of PUT /v1/loyalties/{campaignId}: the
// properties present are replaced.
type UpdateRequest struct {
	Description                     *string         `json:"description"`
	Type                            *string         `json:"type"`
	AutoJoin                        *bool           `json:"auto_join"`
	JoinOnce                        *bool           `json:"join_once"`
	StartDate                       *time.Time      `json:"start_date"`
	ExpirationDate                  *time.Time      `json:"expiration_date"`
	ValidityTimeframe               json.RawMessage `json:"validity_timeframe"`
	ValidityDayOfWeek               json.RawMessage `json:"validity_day_of_week"`
	ValidityHours                   json.RawMessage `json:"validity_hours"`
	ActivityDurationAfterPublishing *string         `json:"activity_duration_after_publishing"`
	Metadata                        map[string]any  `json:"metadata"`
	Category                        *string         `json:"category"`
	CategoryID                      *string         `json:"category_id"`
	LoyaltyCard                     *cardRequest    `json:"loyalty_card"`
}

// UpdateCampaign changes a campaign's properties.
func (s *Service) UpdateCampaign(ctx context.Context, projectID, idOrName string, r UpdateRequest) (CampaignView, error) {
	if r.Type != nil && *r.Type != "AUTO_UPDATE" && *r.Type != "STATIC" {
		return CampaignView{}, apierr.InvalidPayload("type must be AUTO_UPDATE or STATIC")
	}
	if r.JoinOnce != nil && !*r.JoinOnce {
		return CampaignView{}, apierr.InvalidPayload("join_once is always true for loyalty campaigns")
	}
	if r.LoyaltyCard != nil {
		if err := checkRules(r.LoyaltyCard.ExpirationRules); err != nil {
			return CampaignView{}, err
		}
		if r.LoyaltyCard.Points != nil {
			return CampaignView{}, apierr.InvalidPayload("loyalty_card.points applies to new campaigns only")
		}
	}
	var c Campaign
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if c, err = s.campaign(ctx, tx, projectID, idOrName); err != nil {
			return err
		}
		a := &c.Attrs
		set := func(dst **string, v *string) {
			if v != nil {
				*dst = v
			}
		}
		set(&a.Description, r.Description)
		set(&a.ActivityDurationAfterPublishing, r.ActivityDurationAfterPublishing)
		set(&a.Category, r.Category)
		set(&a.CategoryID, r.CategoryID)
		if r.Type != nil {
			a.Type = *r.Type
		}
		if r.AutoJoin != nil {
			a.AutoJoin = *r.AutoJoin
		}
		if r.StartDate != nil {
			a.StartDate = r.StartDate
		}
		if r.ExpirationDate != nil {
			a.ExpirationDate = r.ExpirationDate
		}
		if a.StartDate != nil && a.ExpirationDate != nil && !a.ExpirationDate.After(*a.StartDate) {
			return apierr.InvalidPayload("expiration_date must be after start_date")
		}
		for _, f := range []struct{ dst, v *json.RawMessage }{{&a.ValidityTimeframe, &r.ValidityTimeframe},
			{&a.ValidityDayOfWeek, &r.ValidityDayOfWeek}, {&a.ValidityHours, &r.ValidityHours}} {
			if len(*f.v) > 0 {
				*f.dst = *f.v
			}
		}
		if r.Metadata != nil {
			a.Metadata = r.Metadata
		}
		if r.LoyaltyCard != nil && r.LoyaltyCard.ExpirationRules != nil {
			a.Voucher.LoyaltyCard.ExpirationRules = r.LoyaltyCard.ExpirationRules
		}
		now := s.Now()
		c.UpdatedAt = &now
		if err := updateCampaign(ctx, tx, projectID, c); err != nil {
			return err
		}
		return s.events.Emit(ctx, tx, projectID, EventCampaignUpdated, c.ID, c.View())
	})
	if err != nil {
		return CampaignView{}, err
	}
	return c.View(), nil
}

// DeleteCampaign removes a campaign at once (it and its cards answer 404)
// and deletes its cards and their ledger in the CAMPAIGN.VOUCHERS_DELETE
// async action, whose id it returns.
func (s *Service) DeleteCampaign(ctx context.Context, projectID, idOrName string) (string, error) {
	var actionID string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := s.campaign(ctx, tx, projectID, idOrName)
		if err != nil {
			return err
		}
		// The name is freed for a new campaign.
		if _, err := tx.Exec(ctx, `UPDATE loyalty_campaigns SET deleted_at = $3, name = $4 WHERE project_id = $1 AND id = $2`,
			projectID, c.ID, s.Now(), c.Name+" #deleted:"+c.ID); err != nil {
			return err
		}
		act, err := async.StartJob(ctx, tx, projectID, DeleteJob, generateParams{CampaignID: c.ID})
		if err != nil {
			return err
		}
		actionID = act.ID
		return s.events.Emit(ctx, tx, projectID, EventCampaignDeleted, c.ID, c.View())
	})
	return actionID, err
}

// deleteJob deletes a deleted campaign's cards, buckets and transactions,
// a chunk of cards per transaction.
func (s *Service) deleteJob(ctx context.Context, job *async.Job) (any, error) {
	var p generateParams
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return nil, err
	}
	var deleted int64
	for {
		var n int64
		err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT id FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2 ORDER BY id LIMIT 1000`,
				job.ProjectID, p.CampaignID)
			if err != nil {
				return err
			}
			cardIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(cardIDs) == 0 {
				return err
			}
			n = int64(len(cardIDs))
			b := &pgx.Batch{}
			b.Queue(`DELETE FROM loyalty_transactions WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`, job.ProjectID, cardIDs)
			b.Queue(`DELETE FROM loyalty_point_buckets WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`, job.ProjectID, cardIDs)
			// Pending entries go with their cards: left, the sweep would
			// read them as due on every pass.
			b.Queue(`DELETE FROM loyalty_pending_points WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`, job.ProjectID, cardIDs)
			b.Queue(`DELETE FROM loyalty_cards WHERE project_id = $1 AND id = ANY($2::TEXT[])`, job.ProjectID, cardIDs)
			return tx.SendBatch(ctx, b).Close()
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		deleted += n
		_ = job.Progress(ctx, 50)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM earning_rules WHERE project_id = $1 AND campaign_id = $2`, job.ProjectID, p.CampaignID); err != nil {
		return nil, err
	}
	return map[string]any{"campaign_id": p.CampaignID, "deleted_vouchers": deleted}, nil
}

// MemberRequest is the body of POST /v1/loyalties/{campaignId}/members.
type MemberRequest struct {
	Voucher  *string         `json:"voucher"`
	SourceID *string         `json:"source_id"`
	Customer json.RawMessage `json:"customer"`
	Metadata map[string]any  `json:"metadata"`
	Channel  *string         `json:"channel"`
}

// AddMember gives a customer a card of the campaign: the named one, a free
// one, or (AUTO_UPDATE campaigns) a new one. A customer already holding a
// card of the campaign gets that card back: a program is joined once.
func (s *Service) AddMember(ctx context.Context, projectID, campaignID string, r MemberRequest) (_ CardView, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.AddMember")
	defer telemetry.End(span, &err)
	if len(r.Customer) == 0 || string(r.Customer) == "null" {
		return CardView{}, apierr.InvalidPayload("customer is required: a customer id, or an object with id, source_id or the customer's data")
	}
	var custRef string
	var patch *customers.Patch
	if err := json.Unmarshal(r.Customer, &custRef); err != nil {
		patch = &customers.Patch{}
		if err := json.Unmarshal(r.Customer, patch); err != nil {
			return CardView{}, apierr.InvalidPayload("customer must be a customer id or a customer object: " + err.Error())
		}
	}
	var card Card
	var camp Campaign
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if camp, err = s.campaign(ctx, tx, projectID, campaignID); err != nil {
			return err
		}
		var custID string
		if patch != nil {
			cust, _, err := s.customers.UpsertIn(ctx, tx, projectID, patch)
			if err != nil {
				return err
			}
			custID = cust.ID
		} else {
			cust, err := s.customers.GetIn(ctx, tx, projectID, custRef)
			if err != nil {
				return err
			}
			custID = cust.ID
		}
		existing, err := scanCard(tx.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards
			WHERE project_id = $1 AND holder_id = $2 AND campaign_id = $3 LIMIT 1`, projectID, custID, camp.ID))
		if err == nil {
			card = existing
			return nil
		}
		if !errors.Is(err, db.ErrNotFound) {
			return err
		}
		switch {
		case r.Voucher != nil:
			card, err = getCard(ctx, tx, projectID, *r.Voucher, true)
			if errors.Is(err, db.ErrNotFound) || (err == nil && card.CampaignID != camp.ID) {
				return notFoundCard(*r.Voucher)
			}
			if err != nil {
				return err
			}
			if card.HolderID != nil {
				return apierr.New(http.StatusBadRequest, "voucher_already_published", "Voucher already published",
					fmt.Sprintf("Card %s already belongs to another customer.", card.Code))
			}
		default:
			card, err = scanCard(tx.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards
				WHERE project_id = $1 AND holder_id IS NULL AND campaign_id = $2 LIMIT 1 FOR UPDATE SKIP LOCKED`, projectID, camp.ID))
			if errors.Is(err, db.ErrNotFound) {
				if camp.Attrs.Type != "AUTO_UPDATE" {
					return apierr.New(http.StatusBadRequest, "no_voucher_suitable_for_publication", "Couldn't find any voucher suitable for publication",
						fmt.Sprintf("Campaign %s has no free cards and is STATIC.", camp.ID))
				}
				gen, gerr := newGenerator(camp.Attrs.Voucher.CodeConfig)
				if gerr != nil {
					return gerr
				}
				if _, err = s.generate(ctx, tx, projectID, camp, gen, 1, s.Now()); err != nil {
					return err
				}
				if _, err = tx.Exec(ctx, `UPDATE loyalty_campaigns SET vouchers_count = vouchers_count + 1 WHERE project_id = $1 AND id = $2`,
					projectID, camp.ID); err != nil {
					return err
				}
				card, err = scanCard(tx.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards
					WHERE project_id = $1 AND holder_id IS NULL AND campaign_id = $2 LIMIT 1 FOR UPDATE`, projectID, camp.ID))
			}
			if err != nil {
				return err
			}
		}
		now := s.Now()
		card.HolderID, card.UpdatedAt = &custID, &now
		if r.Metadata != nil {
			card.Metadata = r.Metadata
		}
		meta, _ := json.Marshal(card.Metadata)
		if _, err := tx.Exec(ctx, `UPDATE loyalty_cards SET holder_id = $3, metadata = $4, updated_at = $5 WHERE project_id = $1 AND id = $2`,
			projectID, card.ID, custID, meta, now); err != nil {
			return err
		}
		return s.events.Emit(ctx, tx, projectID, EventVoucherPublished, card.ID, card.View(camp))
	})
	if err != nil {
		return CardView{}, err
	}
	return card.View(camp), nil
}

// GetMember returns a card by code or id; campaignID, when given, must be its campaign.
func (s *Service) GetMember(ctx context.Context, projectID, campaignID, memberID string) (CardView, error) {
	c, camp, err := s.card(ctx, s.pool, projectID, campaignID, memberID, false)
	if err != nil {
		return CardView{}, err
	}
	return c.View(camp), nil
}

// ListMembers returns a page of a campaign's cards.
func (s *Service) ListMembers(ctx context.Context, projectID, campaignID string, lq listq.Query) ([]CardView, int, bool, string, error) {
	camp, err := s.campaign(ctx, s.pool, projectID, campaignID)
	if err != nil {
		return nil, 0, false, "", err
	}
	cs, total, err := listCards(ctx, s.pool, projectID, camp.ID, lq)
	if err != nil {
		return nil, 0, false, "", err
	}
	out, more, next := listq.PageOf(cs, lq.Limit, func(c Card) string { return c.ID }, func(c Card) CardView { return c.View(camp) })
	return out, total, more, next, nil
}

// BalanceRequest is the body of POST …/members/{memberId}/balance: positive
// points are added, negative ones removed.
type BalanceRequest struct {
	Points         *int64  `json:"points"`
	ExpirationType *string `json:"expiration_type"`
	ExpirationDate *string `json:"expiration_date"`
	Reason         *string `json:"reason"`
	SourceID       *string `json:"source_id"`
}

func checkText(name string, v *string) error {
	if v != nil && len(*v) > 1000 {
		return apierr.InvalidPayload(name + " is at most 1000 characters")
	}
	return nil
}

// UpdateBalance adds or removes points, writing POINTS_ADDITION or
// POINTS_REMOVAL with the card's new figures in one transaction.
func (s *Service) UpdateBalance(ctx context.Context, projectID, campaignID, memberID string, r BalanceRequest) (_ Balance, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.UpdateBalance")
	defer telemetry.End(span, &err)
	if r.Points == nil || *r.Points == 0 {
		return Balance{}, apierr.InvalidPayload("points is required and must not be 0: positive to add, negative to remove")
	}
	pts := *r.Points
	if pts > 1_000_000_000 || pts < -1_000_000_000 {
		return Balance{}, apierr.InvalidPayload("points must be within ±1000000000")
	}
	if err := checkText("reason", r.Reason); err != nil {
		return Balance{}, err
	}
	if err := checkText("source_id", r.SourceID); err != nil {
		return Balance{}, err
	}
	expType := "PROGRAM_RULES"
	if r.ExpirationType != nil {
		expType = *r.ExpirationType
	}
	var custom *time.Time
	switch expType {
	case "PROGRAM_RULES", "NON_EXPIRING":
		if r.ExpirationDate != nil {
			return Balance{}, apierr.InvalidPayload("expiration_date goes with expiration_type CUSTOM_DATE")
		}
	case "CUSTOM_DATE":
		if pts < 0 {
			return Balance{}, apierr.InvalidPayload("an expiration applies to added points, not removed ones")
		}
		if r.ExpirationDate == nil {
			return Balance{}, apierr.InvalidPayload("expiration_date (YYYY-MM-DD) is required with expiration_type CUSTOM_DATE")
		}
		d, err := parseDate(*r.ExpirationDate)
		if err != nil {
			return Balance{}, apierr.InvalidPayload("expiration_date must be a date, YYYY-MM-DD")
		}
		if !d.After(s.Now()) {
			return Balance{}, apierr.InvalidPayload("expiration_date must be in the future")
		}
		custom = &d
	default:
		return Balance{}, apierr.InvalidPayload("expiration_type must be PROGRAM_RULES, CUSTOM_DATE or NON_EXPIRING")
	}
	var out Balance
	// READ COMMITTED with the card's row lock: concurrent operations on one
	// card queue on the lock and each then reads what the one before it
	// wrote. Under SERIALIZABLE, PostgreSQL aborts every waiter that the
	// lock holder overtook, and a hot card starves its clients of retries.
	// Everything the operation reads that others write (the card, its
	// buckets) is read after the lock: two round trips in all, the locking
	// read with BEGIN and the writes with COMMIT.
	err = db.InPipe(ctx, s.pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		var buckets *[]bucket
		if pts < 0 {
			buckets = new([]bucket)
		}
		card, err := s.lockCard(ctx, func(b *pgx.Batch) error { return p.Send(ctx, b).Close() }, projectID, campaignID, memberID, buckets)
		if err != nil {
			return nil, err
		}
		camp := card.Campaign
		now := s.Now()
		card.UpdatedAt = &now
		t := Transaction{ID: ids.New("vtx_"), VoucherID: card.ID, CampaignID: card.CampaignID, SourceID: r.SourceID,
			Reason: r.Reason, Source: ptr("API"), CreatedAt: jsonx.Time{Time: now}, delta: pts}
		w := &pgx.Batch{}
		if pts > 0 {
			exp := custom
			if expType == "PROGRAM_RULES" {
				exp = camp.Attrs.Voucher.LoyaltyCard.ExpirationRules.expiry(now)
			}
			queueAddBucket(w, projectID, card.ID, pts, exp, now)
			card.Points += pts
			card.Balance += pts
			card.expireAlso(pts, exp)
			t.Type = PointsAddition
		} else {
			if card.Balance < -pts {
				return nil, pointsExceeded(card.Card, -pts)
			}
			rest, err := queueTake(w, projectID, card.ID, *buckets, -pts, now)
			if err != nil {
				return nil, err
			}
			card.SubtractedPoints += -pts
			card.Balance += pts
			card.expireFrom(rest)
			t.Type = PointsRemoval
		}
		queueFigures(w, projectID, &card.Card)
		out = card.balance(pts)
		t.Details, _ = json.Marshal(map[string]any{"balance": out})
		if err := s.record(ctx, w, projectID, t, card.Card, camp); err != nil {
			return nil, err
		}
		if pts > 0 {
			err := s.events.Queue(ctx, w, projectID, EventPointsAdded, card.ID,
				map[string]any{"voucher": card.View(camp), "balance": out, "transaction": t})
			return w, err
		}
		return w, nil
	})
	return out, err
}

// lockCard locks and reads a card of a live campaign (and, when buckets is
// not nil, its buckets) with send, which runs a batch in the caller's
// transaction: by code, the way clients name cards, then, for what may be
// an id, by id. A card not found is its 404.
//
// also, when given, queues more reads into the same batch: of things found
// through the card with code (or, byID, id) key.
func (s *Service) lockCard(ctx context.Context, send func(*pgx.Batch) error, projectID, campaignID, memberID string,
	buckets *[]bucket, also ...func(b *pgx.Batch, key string, byID bool)) (lockedCard, error) {
	var card lockedCard
	for _, byID := range []bool{false, true} {
		if byID && !strings.HasPrefix(memberID, "v_") {
			break
		}
		b := &pgx.Batch{}
		queueLockCard(b, s.attrs, projectID, campaignID, memberID, byID, &card)
		if buckets != nil {
			queueBuckets(b, projectID, memberID, byID, buckets)
		}
		for _, f := range also {
			f(b, memberID, byID)
		}
		if err := send(b); err != nil {
			return card, err
		}
		if card.Found {
			return card, nil
		}
	}
	return card, s.missingCard(ctx, projectID, campaignID, memberID)
}

// missingCard is the error for a card that queueLockCard did not find: its
// campaign's 404 when the path names a campaign that is not there, else
// the card's.
func (s *Service) missingCard(ctx context.Context, projectID, campaignID, memberID string) error {
	if campaignID != "" {
		if _, err := s.campaign(ctx, s.pool, projectID, campaignID); err != nil {
			return err
		}
	}
	return notFoundCard(memberID)
}

// record queues a ledger entry and its webhook event, and the tier events
// when the entry moved the card between its campaign's tiers.
func (s *Service) record(ctx context.Context, b *pgx.Batch, projectID string, t Transaction, card Card, camp Campaign) error {
	queueTransaction(b, projectID, t)
	if err := s.events.Queue(ctx, b, projectID, EventTransactionCreated, t.ID,
		map[string]any{"transaction": t, "voucher": card.View(camp)}); err != nil {
		return err
	}
	return s.queueTierShift(ctx, b, projectID, card, camp, card.Balance-t.delta)
}

func parseDate(s string) (time.Time, error) {
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return d, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, err
	}
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
}

func ptr[T any](v T) *T { return &v }

// TransferRequest is one source card of a transfer.
type TransferRequest struct {
	Code     string  `json:"code"`
	Points   int64   `json:"points"`
	Reason   *string `json:"reason"`
	SourceID *string `json:"source_id"`
}

// Transfer moves points from source cards to the member's card, all or
// nothing: POINTS_TRANSFER_OUT on each donor and POINTS_TRANSFER_IN on the
// receiver, each naming the other as its related transaction.
func (s *Service) Transfer(ctx context.Context, projectID, campaignID, memberID string, rs []TransferRequest) (_ CardView, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.Transfer")
	defer telemetry.End(span, &err)
	if len(rs) == 0 || len(rs) > 100 {
		return CardView{}, apierr.InvalidPayload("the body is a list of 1 to 100 source cards: [{\"code\": …, \"points\": …}]")
	}
	for i, r := range rs {
		if r.Code == "" {
			return CardView{}, apierr.InvalidPayload(fmt.Sprintf("[%d].code is required", i))
		}
		if r.Points <= 0 || r.Points > 1_000_000_000 {
			return CardView{}, apierr.InvalidPayload(fmt.Sprintf("[%d].points must be a positive number of points", i))
		}
		if err := checkText(fmt.Sprintf("[%d].reason", i), r.Reason); err != nil {
			return CardView{}, err
		}
		if err := checkText(fmt.Sprintf("[%d].source_id", i), r.SourceID); err != nil {
			return CardView{}, err
		}
	}
	var dest Card
	var destCamp Campaign
	// READ COMMITTED with row locks taken in id order, as for UpdateBalance.
	err = db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if dest, destCamp, err = s.card(ctx, tx, projectID, campaignID, memberID, false); err != nil {
			return err
		}
		// Lock every card in one order (by id), so that transfers in
		// opposite directions cannot deadlock.
		donors := map[string]Card{}
		donorCamps := map[string]Campaign{}
		for _, r := range rs {
			if _, ok := donors[r.Code]; ok {
				continue
			}
			c, camp, err := s.card(ctx, tx, projectID, "", r.Code, false)
			if err != nil {
				return err
			}
			if c.ID == dest.ID {
				return apierr.InvalidPayload(fmt.Sprintf("card %s cannot transfer points to itself", r.Code))
			}
			donors[r.Code], donorCamps[r.Code] = c, camp
		}
		order := []string{dest.ID}
		for _, c := range donors {
			order = append(order, c.ID)
		}
		sort.Strings(order)
		locked := map[string]Card{}
		for _, id := range order {
			c, err := getCard(ctx, tx, projectID, id, true)
			if err != nil {
				return err
			}
			locked[id] = c
		}
		dest = locked[dest.ID]
		// The campaigns' tiers, for the tier events of the moves.
		tiers := map[string][]Tier{}
		for _, camp := range append([]Campaign{destCamp}, slices.Collect(maps.Values(donorCamps))...) {
			if _, ok := tiers[camp.ID]; !ok {
				if tiers[camp.ID], err = tiersOf(ctx, tx, projectID, camp.ID); err != nil {
					return err
				}
			}
		}
		destCamp.Tiers = tiers[destCamp.ID]
		for code, camp := range donorCamps {
			camp.Tiers = tiers[camp.ID]
			donorCamps[code] = camp
		}
		now := s.Now()
		want := map[string]int64{}
		for _, r := range rs {
			want[r.Code] += r.Points
		}
		for code, n := range want {
			if c := locked[donors[code].ID]; c.Balance < n {
				return pointsExceeded(c, n)
			}
		}
		exp := destCamp.Attrs.Voucher.LoyaltyCard.ExpirationRules.expiry(now)
		// The donors' buckets, read under their locks, then every write in
		// one batch.
		buckets := map[string]*[]bucket{}
		rb := &pgx.Batch{}
		for _, c := range donors {
			buckets[c.ID] = new([]bucket)
			queueBuckets(rb, projectID, c.ID, true, buckets[c.ID])
		}
		if err := tx.SendBatch(ctx, rb).Close(); err != nil {
			return err
		}
		w := &pgx.Batch{}
		dest.UpdatedAt = &now
		for _, r := range rs {
			donor := locked[donors[r.Code].ID]
			rest, err := queueTake(w, projectID, donor.ID, *buckets[donor.ID], r.Points, now)
			if err != nil {
				return err
			}
			*buckets[donor.ID] = rest
			donor.SubtractedPoints += r.Points
			donor.Balance -= r.Points
			donor.expireFrom(rest)
			donor.UpdatedAt = &now
			locked[donor.ID] = donor
			queueAddBucket(w, projectID, dest.ID, r.Points, exp, now)
			dest.Points += r.Points
			dest.Balance += r.Points
			dest.expireAlso(r.Points, exp)
			outID, inID := ids.New("vtx_"), ids.New("vtx_")
			out := Transaction{ID: outID, VoucherID: donor.ID, CampaignID: donor.CampaignID, SourceID: r.SourceID, Reason: r.Reason,
				Source: ptr("API"), Type: PointsTransferOut, RelatedTransactionID: &inID, CreatedAt: jsonx.Time{Time: now}, delta: -r.Points}
			out.Details, _ = json.Marshal(map[string]any{"balance": donor.balance(-r.Points),
				"destination_voucher": dest.simpleVoucher(destCamp)})
			in := Transaction{ID: inID, VoucherID: dest.ID, CampaignID: dest.CampaignID, SourceID: r.SourceID, Reason: r.Reason,
				Source: ptr("API"), Type: PointsTransferIn, RelatedTransactionID: &outID, CreatedAt: jsonx.Time{Time: now}, delta: r.Points}
			in.Details, _ = json.Marshal(map[string]any{"balance": dest.balance(r.Points),
				"source_voucher": donor.simpleVoucher(donorCamps[r.Code])})
			if err := s.record(ctx, w, projectID, out, donor, donorCamps[r.Code]); err != nil {
				return err
			}
			if err := s.record(ctx, w, projectID, in, dest, destCamp); err != nil {
				return err
			}
		}
		for _, c := range donors {
			d := locked[c.ID]
			queueFigures(w, projectID, &d)
		}
		queueFigures(w, projectID, &dest)
		return tx.SendBatch(ctx, w).Close()
	})
	if err != nil {
		return CardView{}, err
	}
	return dest.View(destCamp), nil
}

// ListTransactions returns a page of a card's transactions (memberID set)
// or of a campaign's.
func (s *Service) ListTransactions(ctx context.Context, projectID, campaignID, memberID string, tq TxQuery) ([]Transaction, bool, string, error) {
	tq.Member, tq.Campaign = memberID, campaignID
	ts, err := listTransactions(ctx, s.pool, projectID, tq, s.Now())
	if err != nil {
		return nil, false, "", err
	}
	if len(ts) == 0 { // an empty page, or no such card or campaign
		if memberID != "" {
			_, _, err = s.card(ctx, s.pool, projectID, campaignID, memberID, false)
		} else {
			_, err = s.campaign(ctx, s.pool, projectID, campaignID)
		}
		if err != nil {
			return nil, false, "", err
		}
	}
	ts, more, next := listq.Page(ts, tq.Limit, func(t Transaction) string { return t.ID })
	return ts, more, next, nil
}
