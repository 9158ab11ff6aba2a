// Package program is the loyalty program's campaigns.Kind: what
// LOYALTY_PROGRAM adds to regional/campaigns' registry (its create, read
// and update bodies, its cards' generation and deletion, its summary),
// served by regional/loyalty, which keeps the cards and the points ledger.
package program

import (
	"context"
	"encoding/json"

	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
)

// RewardCounts counts a loyalty program's reward redemptions within a
// period, and their rollbacks (regional/redemptions').
type RewardCounts interface {
	Counts(ctx context.Context, projectID, campaignID string, p campaigns.Period) (redeemed, rolledBack int64, err error)
}

// Kind is LOYALTY_PROGRAM's campaigns.Kind: the program's cards.
type Kind struct {
	svc     *loyalty.Service
	rewards RewardCounts
	earning loyalty.Earning
}

// NewKind returns the loyalty program's kind; rewards counts its reward
// redemptions in its summaries, and earning drops what it keeps of the
// cards of a deleted program (nil: nothing kept).
func NewKind(s *loyalty.Service, rewards RewardCounts, earning loyalty.Earning) Kind {
	return Kind{svc: s, rewards: rewards, earning: earning}
}

// Create creates a loyalty program from POST /v1/campaigns' body.
func (k Kind) Create(ctx context.Context, projectID string, raw json.RawMessage) (any, error) {
	var r loyalty.CreateRequest
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
	var r loyalty.UpdateRequest
	if err := campaigns.Decode(raw, &r); err != nil {
		return nil, err
	}
	return k.svc.UpdateCampaign(ctx, projectID, id, r)
}

// Generate makes the cards a CAMPAIGN.VOUCHERS_GENERATE job counted.
func (k Kind) Generate(ctx context.Context, job *async.Job, p campaigns.GenerateParams) error {
	return k.svc.GenerateCards(ctx, job, p)
}

// Drop deletes a deleted program's cards, their ledger and what earning
// keeps of them.
func (k Kind) Drop(ctx context.Context, job *async.Job, campaignID string) (int64, error) {
	return k.svc.DropCards(ctx, job, campaignID, k.earning)
}

// Summary is a loyalty program's figures: its cards, its reward
// redemptions and its points by transaction type.
func (k Kind) Summary(ctx context.Context, projectID, campaignID string, p campaigns.Period, _ campaigns.Stacked) (campaigns.Summary, error) {
	out := campaigns.Summary{Vouchers: true}
	created, sums, err := k.svc.CardFigures(ctx, projectID, campaignID, p)
	if err != nil {
		return out, err
	}
	out.VouchersCreated = created
	if out.Redeemed, out.RolledBack, err = k.rewards.Counts(ctx, projectID, campaignID, p); err != nil {
		return out, err
	}
	out.Figures = map[string]any{}
	for f, t := range map[string]string{"points_added": loyalty.PointsAddition, "points_subtracted": loyalty.PointsRemoval,
		"points_rewarded": loyalty.PointsAccrual, "points_redeemed": loyalty.PointsRedemption, "points_rolledback": loyalty.PointsRefund,
		"points_expired": loyalty.PointsExpiration, "points_transferred_out": loyalty.PointsTransferOut,
		"points_transferred_in": loyalty.PointsTransferIn} {
		out.Figures[f] = abs(sums[t])
	}
	out.Figures["created_vouchers_points"], out.Figures["points_deleted"] = 0, 0
	out.Figures["pending_points_added"], out.Figures["pending_points_subtracted"] = 0, 0
	out.Figures["pending_points_activated"], out.Figures["pending_points_canceled"] = abs(sums[loyalty.PendingPointsActivation]), 0
	return out, nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
