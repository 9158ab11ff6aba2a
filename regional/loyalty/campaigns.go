package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/telemetry"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty/expiry"
	"github.com/tallyhq/tally/regional/vouchercodes"
	"github.com/tallyhq/tally/regional/webhooks"
)

// CreateRequest is the body of POST /v1/loyalties.
type CreateRequest struct {
	campaigns.CreateRequest
	Voucher  *voucherRequest `json:"voucher"`
	Metadata map[string]any  `json:"metadata"`
}

type voucherRequest struct {
	Type        *string        `json:"type"`
	LoyaltyCard *cardRequest   `json:"loyalty_card"`
	Redemption  map[string]any `json:"redemption"`
	CodeConfig  *codes.Config  `json:"code_config"`
}

type cardRequest struct {
	Points          *int64        `json:"points"`
	ExpirationRules *expiry.Rules `json:"expiration_rules"`
}

const maxCards = 1_000_000

// CreateCampaign creates a loyalty program and its cards: one in the
// request, more by the CAMPAIGN.VOUCHERS_GENERATE async action.
func (s *Service) CreateCampaign(ctx context.Context, projectID string, r CreateRequest) (_ CampaignView, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.CreateCampaign")
	defer telemetry.End(span, &err)
	now := s.Now()
	c := Campaign{}
	if c.Campaign, err = campaigns.New[VoucherConfig](r.CreateRequest, "LOYALTY_PROGRAM", now); err != nil {
		return CampaignView{}, err
	}
	if r.CampaignType != nil && *r.CampaignType != "LOYALTY_PROGRAM" {
		return CampaignView{}, apierr.InvalidPayload("campaign_type must be LOYALTY_PROGRAM")
	}
	if r.JoinOnce != nil && !*r.JoinOnce {
		return CampaignView{}, apierr.InvalidPayload("join_once is always true for loyalty campaigns")
	}
	a := &c.Attrs
	a.JoinOnce, a.Metadata, a.StartDate, a.ExpirationDate = true, r.Metadata, r.StartDate, r.ExpirationDate
	a.ValidityTimeframe, a.ValidityDayOfWeek, a.ValidityHours = r.ValidityTimeframe, r.ValidityDayOfWeek, r.ValidityHours
	a.Voucher = VoucherConfig{Type: "LOYALTY_CARD", Redemption: map[string]any{"quantity": nil}}
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
			if err := expiry.Check(v.LoyaltyCard.ExpirationRules); err != nil {
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
	gen, err := codes.New(a.Voucher.CodeConfig)
	if err != nil {
		return CampaignView{}, err
	}
	count := c.VouchersCount
	if count < 0 || count > maxCards {
		return CampaignView{}, apierr.InvalidPayload(fmt.Sprintf("vouchers_count must be from 0 to %d", maxCards))
	}
	if err := gen.Check(count); err != nil {
		return CampaignView{}, err
	}
	var actionID *string
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c.GenerationStatus, actionID = "DONE", nil
		if count > 1 {
			c.GenerationStatus = "IN_PROGRESS"
		}
		if err := campaigns.Insert(ctx, s.camps, tx, projectID, &c.Campaign, r.Category, r.CategoryID); err != nil {
			return err
		}
		if count == 1 {
			if _, err := s.generate(ctx, tx, projectID, c, gen, 1, now); err != nil {
				return err
			}
		} else if count > 1 {
			act, err := async.StartJob(ctx, tx, projectID, campaigns.GenerateJob, campaigns.GenerateParams{CampaignID: c.ID, Count: count})
			if err != nil {
				return err
			}
			actionID = &act.ID
		}
		return s.camps.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: campaigns.EventCreated, Entity: c.ID, Object: c.View()})
	})
	if err != nil {
		return CampaignView{}, err
	}
	v := c.View()
	v.AsyncActionID = actionID
	return v, nil
}

// generate makes n cards of a campaign in q, in chunks, regenerating the
// codes that collide with existing ones. It returns how many it made.
func (s *Service) generate(ctx context.Context, q db.Querier, projectID string, c Campaign, gen codes.Generator, n int64, now time.Time) (int64, error) {
	var made int64
	for tries := 0; made < n; tries++ {
		if tries > 50 {
			return made, errors.New("loyalty: code space too crowded to generate cards")
		}
		chunk := min(n-made, 5000)
		codes := make([]string, chunk)
		for i := range codes {
			codes[i] = gen.Next()
		}
		cardIDs := make([]string, chunk)
		for i := range cardIDs {
			cardIDs[i] = ids.New("v_")
		}
		// A code is unique in the project across every voucher type: the
		// registry (regional/vouchercodes, shared with regional/vouchers) takes it
		// first, and a code taken there, by a card or a voucher, is skipped
		// and made again in the next round. One statement per chunk.
		rows, err := q.Query(ctx, vouchercodes.Reserve(1, 4, 5)+`INSERT INTO loyalty_cards (project_id, id, code, campaign_id, created_at)
			SELECT $1, reg.voucher_id, reg.code, $2, $3 FROM reg
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
	exp := c.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(now)
	txIDs, details := make([]string, len(cardIDs)), make([]string, len(cardIDs))
	for i, id := range cardIDs {
		txIDs[i] = ids.New("vtx_")
		card := Card{ID: id, Points: points, Balance: points}
		d, _ := json.Marshal(map[string]any{"balance": card.BalanceAfter(points)})
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

// GetCampaign returns a campaign by id or name.
func (s *Service) GetCampaign(ctx context.Context, projectID, idOrName string) (CampaignView, error) {
	c, err := s.Campaign(ctx, s.pool, projectID, idOrName)
	if err != nil {
		return CampaignView{}, err
	}
	return c.View(), nil
}

// ListCampaigns returns a page of campaigns in id (creation) order.
func (s *Service) ListCampaigns(ctx context.Context, projectID string, lq listq.Query) ([]CampaignView, int, bool, string, error) {
	cs, total, err := campaigns.List[VoucherConfig](ctx, s.pool, projectID, []string{"LOYALTY_PROGRAM"}, lq)
	if err != nil {
		return nil, 0, false, "", err
	}
	out, more, next := listq.PageOf(cs, lq.Limit, func(c campaigns.Campaign[VoucherConfig]) string { return c.ID },
		campaigns.Campaign[VoucherConfig].ViewOf)
	return out, total, more, next, nil
}

// UpdateRequest is the body of PUT /v1/loyalties/{campaignId}: the
// properties present are replaced.
type UpdateRequest struct {
	campaigns.CommonUpdate
	LoyaltyCard *cardRequest `json:"loyalty_card"`
}

// UpdateCampaign changes a campaign's properties.
func (s *Service) UpdateCampaign(ctx context.Context, projectID, idOrName string, r UpdateRequest) (CampaignView, error) {
	if r.JoinOnce != nil && !*r.JoinOnce {
		return CampaignView{}, apierr.InvalidPayload("join_once is always true for loyalty campaigns")
	}
	if r.LoyaltyCard != nil {
		if err := expiry.Check(r.LoyaltyCard.ExpirationRules); err != nil {
			return CampaignView{}, err
		}
		if r.LoyaltyCard.Points != nil {
			return CampaignView{}, apierr.InvalidPayload("loyalty_card.points applies to new campaigns only")
		}
	}
	c, err := campaigns.Change(ctx, s.camps, projectID, idOrName, campaigns.EventUpdated, []string{"LOYALTY_PROGRAM"},
		func(_ pgx.Tx, c *campaigns.Campaign[VoucherConfig]) error {
			if err := campaigns.ApplyCommon(&c.Attrs, r.CommonUpdate); err != nil {
				return err
			}
			if r.LoyaltyCard != nil && r.LoyaltyCard.ExpirationRules != nil {
				c.Attrs.Voucher.LoyaltyCard.ExpirationRules = r.LoyaltyCard.ExpirationRules
			}
			return nil
		})
	if err != nil {
		return CampaignView{}, err
	}
	return c.ViewOf(), nil
}

// DeleteCampaign removes a loyalty program at once (it and its cards
// answer 404) and deletes its cards and their ledger in the
// CAMPAIGN.VOUCHERS_DELETE async action, whose id it returns.
func (s *Service) DeleteCampaign(ctx context.Context, projectID, idOrName string) (string, error) {
	id, err := s.camps.Remove(ctx, projectID, idOrName, true, "LOYALTY_PROGRAM")
	if err != nil {
		return "", err
	}
	return *id, nil
}
