package loyalty

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// Period is the span of a campaign summary: from (inclusive) and to
// (exclusive), either open.
type Period struct{ From, To *time.Time }

// Cond is the condition that col is within p, its bounds appended to args.
func (p Period) Cond(col string, args []any) (string, []any) {
	args = append(args, p.From, p.To)
	f, t := len(args)-1, len(args)
	return fmt.Sprintf(` AND ($%d::TIMESTAMPTZ IS NULL OR %s >= $%d) AND ($%d::TIMESTAMPTZ IS NULL OR %s < $%d)`,
		f, col, f, t, col, t), args
}

// Opening is LedgerSums' key of gift cards' opening entries.
const Opening = "OPENING"

// LedgerSums are a campaign's ledger entries within p (points of a loyalty
// program, credits of a gift campaign): per transaction type, the sum of
// their changes.
func (s *Service) LedgerSums(ctx context.Context, projectID, campaignID string, p Period) (map[string]int64, error) {
	cond, args := p.Cond("created_at", []any{projectID, campaignID})
	// A gift card's opening entry (QueueOpeningEntries) is its own key,
	// Opening, not one of the additions made to it.
	rows, err := s.pool.Query(ctx, `SELECT CASE WHEN id LIKE 'vtx\_open\_%' THEN '`+Opening+`' ELSE type END AS t, COALESCE(sum(delta), 0)
		FROM loyalty_transactions WHERE project_id = $1 AND campaign_id = $2`+cond+` GROUP BY t`, args...)
	if err != nil {
		return nil, err
	}
	sums := map[string]int64{}
	var typ string
	var sum int64
	_, err = pgx.ForEachRow(rows, []any{&typ, &sum}, func() error { sums[typ] = sum; return nil })
	return sums, err
}

// CardsCreated counts a loyalty program's cards made within p.
func (s *Service) CardsCreated(ctx context.Context, projectID, campaignID string, p Period) (int64, error) {
	return CountWithin(ctx, s.pool, `SELECT count(*) FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2`,
		"created_at", p, projectID, campaignID)
}

// CountWithin runs a count query (its own arguments args) restricted to
// rows whose col is within p.
func CountWithin(ctx context.Context, q db.Querier, query, col string, p Period, args ...any) (int64, error) {
	cond, args := p.Cond(col, args)
	var n int64
	err := q.QueryRow(ctx, query+cond, args...).Scan(&n)
	return n, err
}
