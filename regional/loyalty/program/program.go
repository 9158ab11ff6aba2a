// Package program is the loyalty program as the API serves it, over the
// cards and the points ledger of regional/loyalty: the programs (the
// campaigns of type LOYALTY_PROGRAM: their creation with their cards'
// template, reads, updates and deletion, campaigns.go), /v1/loyalties
// (http.go: programs, members, balances, transfers, transactions and
// expiring points), a member's activity (activity.go: the card's ledger
// entries merged with its other events) and LOYALTY_PROGRAM's
// campaigns.Kind, what the type adds to regional/campaigns' registry (its
// create, read and update bodies, its cards' generation and deletion, its
// summary). It holds no SQL: every statement is regional/campaigns' or
// regional/loyalty's.
package program

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/codes"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/loyalty/program")

// Service serves the loyalty programs: their rows (camps), their members
// (customers) and their cards and ledger (cards).
type Service struct {
	pool      *db.Pool
	camps     *campaigns.Service
	customers *customers.Service // the members a request names or makes
	cards     *loyalty.Service
}

// NewService returns the programs' service.
func NewService(pool *db.Pool, camps *campaigns.Service, cust *customers.Service, cards *loyalty.Service) *Service {
	return &Service{pool: pool, camps: camps, customers: cust, cards: cards}
}

// RewardCounts counts a loyalty program's reward redemptions within a
// period, and their rollbacks (regional/redemptions').
type RewardCounts interface {
	Counts(ctx context.Context, projectID, campaignID string, p campaigns.Period) (redeemed, rolledBack int64, err error)
}

// Kind is LOYALTY_PROGRAM's campaigns.Kind: the program's cards.
type Kind struct {
	svc     *Service
	rewards RewardCounts
	earning loyalty.Earning
}

// NewKind returns the loyalty program's kind; rewards counts its reward
// redemptions in its summaries, and earning drops what it keeps of the
// cards of a deleted program (nil: nothing kept).
func NewKind(s *Service, rewards RewardCounts, earning loyalty.Earning) Kind {
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
		c, err := s.cards.Campaign(ctx, s.pool, job.ProjectID, p.CampaignID)
		now := s.cards.Now()
		return campaigns.Generation{Codes: c.Attrs.Voucher.CodeConfig, Count: c.VouchersCount,
			Held: func(ctx context.Context) (int64, error) { return loyalty.CountCards(ctx, s.pool, job.ProjectID, c.ID) },
			Make: func(ctx context.Context, tx pgx.Tx, gen codes.Generator, n int64) (int64, error) {
				return s.cards.MakeCards(ctx, tx, job.ProjectID, c, gen, n, now)
			}}, err
	})
}

// Drop deletes a deleted program's cards, their ledger and what earning
// keeps of them.
func (k Kind) Drop(ctx context.Context, job *async.Job, campaignID string) (int64, error) {
	return k.svc.cards.DropCards(ctx, job, campaignID, k.earning)
}

// Summary is a loyalty program's figures: its cards, its reward
// redemptions and its points by transaction type.
func (k Kind) Summary(ctx context.Context, projectID, campaignID string, p campaigns.Period, _ campaigns.Stacked) (campaigns.Summary, error) {
	out := campaigns.Summary{Vouchers: true}
	var err error
	if out.VouchersCreated, err = loyalty.CountCardsWithin(ctx, k.svc.pool, projectID, campaignID, p); err != nil {
		return out, err
	}
	sums, err := loyalty.LedgerSums(ctx, k.svc.pool, projectID, campaignID, p)
	if err != nil {
		return out, err
	}
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
