package loyalty

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
)

// RewardCounts counts a loyalty program's reward redemptions within a
// period, and their rollbacks (regional/redemptions', built on this
// package).
type RewardCounts interface {
	Counts(ctx context.Context, projectID, campaignID string, p campaigns.Period) (redeemed, rolledBack int64, err error)
}

// Kind is LOYALTY_PROGRAM's campaigns.Kind: the program's cards.
type Kind struct {
	svc     *Service
	rewards RewardCounts
	earning Earning
}

// NewKind returns the loyalty program's kind; rewards counts its reward
// redemptions in its summaries, and earning drops what it keeps of the
// cards of a deleted program (nil: nothing kept).
func NewKind(s *Service, rewards RewardCounts, earning Earning) Kind {
	return Kind{svc: s, rewards: rewards, earning: earning}
}

// Create creates a loyalty program from POST /v1/campaigns' body.
func (k Kind) Create(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
	var r CreateRequest
	if err := campaigns.Decode(raw, &r); err != nil {
		return nil, err
	}
	return k.svc.CreateCampaign(ctx, projectID, r)
}

// Get reads a loyalty program.
func (k Kind) Get(ctx context.Context, projectID, id string) (any, error) {
	return k.svc.GetCampaign(ctx, projectID, id)
}

// Update changes a loyalty program from PUT /v1/campaigns/{id}'s body.
func (k Kind) Update(ctx context.Context, projectID, id string, raw json.RawMessage) (any, error) {
	var r UpdateRequest
	if err := campaigns.Decode(raw, &r); err != nil {
		return nil, err
	}
	return k.svc.UpdateCampaign(ctx, projectID, id, r)
}

// Generate makes the cards a CAMPAIGN.VOUCHERS_GENERATE job counted.
func (k Kind) Generate(ctx context.Context, job *async.Job, p campaigns.GenerateParams) error {
	s := k.svc
	return campaigns.Generate(ctx, s.pool, job, p, func(ctx context.Context) (campaigns.Generation, error) {
		c, err := getCampaign(ctx, s.pool, job.ProjectID, p.CampaignID)
		now := s.Now()
		return campaigns.Generation{Codes: c.Attrs.Voucher.CodeConfig, Count: c.VouchersCount,
			Held: func(ctx context.Context) (int64, error) { return countCards(ctx, s.pool, job.ProjectID, c.ID) },
			Make: func(ctx context.Context, tx pgx.Tx, gen codes.Generator, n int64) (int64, error) {
				return s.generate(ctx, tx, job.ProjectID, c, gen, n, now)
			}}, err
	})
}

// Drop deletes a deleted program's cards, their ledger and what earning
// keeps of them, 1,000 cards a transaction.
func (k Kind) Drop(ctx context.Context, job *async.Job, campaignID string) (int64, error) {
	s, projectID := k.svc, job.ProjectID
	var deleted int64
	for {
		var n int64
		err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			n, err = dropCards(ctx, tx, projectID, campaignID, 1000, k.earning)
			return err
		})
		if err != nil {
			return deleted, err
		}
		if n == 0 {
			break
		}
		deleted += n
		_ = job.Progress(ctx, 50)
	}
	if k.earning != nil {
		if err := k.earning.DropOfCampaign(ctx, s.pool, projectID, campaignID); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// Summary is a loyalty program's figures: its cards, its reward
// redemptions and its points by transaction type.
func (k Kind) Summary(ctx context.Context, projectID, campaignID string, p campaigns.Period, _ campaigns.Stacked) (campaigns.Summary, error) {
	out := campaigns.Summary{Vouchers: true}
	var err error
	if out.VouchersCreated, err = countCardsWithin(ctx, k.svc.pool, projectID, campaignID, p); err != nil {
		return out, err
	}
	if out.Redeemed, out.RolledBack, err = k.rewards.Counts(ctx, projectID, campaignID, p); err != nil {
		return out, err
	}
	sums, err := LedgerSums(ctx, k.svc.pool, projectID, campaignID, p)
	if err != nil {
		return out, err
	}
	out.Figures = map[string]any{}
	for f, t := range map[string]string{"points_added": PointsAddition, "points_subtracted": PointsRemoval,
		"points_rewarded": PointsAccrual, "points_redeemed": PointsRedemption, "points_rolledback": PointsRefund,
		"points_expired": PointsExpiration, "points_transferred_out": PointsTransferOut,
		"points_transferred_in": PointsTransferIn} {
		out.Figures[f] = abs(sums[t])
	}
	out.Figures["created_vouchers_points"], out.Figures["points_deleted"] = 0, 0
	out.Figures["pending_points_added"], out.Figures["pending_points_subtracted"] = 0, 0
	out.Figures["pending_points_activated"], out.Figures["pending_points_canceled"] = abs(sums[PendingPointsActivation]), 0
	return out, nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
