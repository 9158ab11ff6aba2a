package loyalty

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
)

// What the loyalty program's campaigns.Kind (regional/loyalty/program)
// asks of the cards besides MakeCards, CountCards, CountCardsWithin and
// LedgerSums: the deletion of a deleted program's cards.

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
