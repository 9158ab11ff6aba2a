package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/vouchercodes"
)

// MakeCards makes n cards of a campaign in q, in chunks, regenerating the
// codes that collide with existing ones, each with the campaign's starting
// points. It returns how many it made.
func (s *Service) MakeCards(ctx context.Context, q db.Querier, projectID string, c Campaign, gen codes.Generator, n int64, now time.Time) (int64, error) {
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
