package loyalty

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/campaigns"
)

// What the loyalty program's campaigns.Kind (regional/loyalty/program)
// asks of the cards and the ledger: their generation, their deletion and
// their figures.

// GenerateCards makes the cards a CAMPAIGN.VOUCHERS_GENERATE job counted.
func (s *Service) GenerateCards(ctx context.Context, job *async.Job, p campaigns.GenerateParams) error {
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

// DropCards deletes a deleted program's cards, their ledger and what
// earning keeps of them (e; nil: nothing kept), 1,000 cards a transaction.
func (s *Service) DropCards(ctx context.Context, job *async.Job, campaignID string, e Earning) (int64, error) {
	projectID := job.ProjectID
	var deleted int64
	for {
		var n int64
		err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			n, err = dropCards(ctx, tx, projectID, campaignID, 1000, e)
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
	if e != nil {
		if err := e.DropOfCampaign(ctx, s.pool, projectID, campaignID); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// CardFigures are a program's cards made within p, and its ledger's sums
// within p by transaction type (LedgerSums).
func (s *Service) CardFigures(ctx context.Context, projectID, campaignID string, p campaigns.Period) (int64, map[string]int64, error) {
	created, err := countCardsWithin(ctx, s.pool, projectID, campaignID, p)
	if err != nil {
		return 0, nil, err
	}
	sums, err := LedgerSums(ctx, s.pool, projectID, campaignID, p)
	return created, sums, err
}
