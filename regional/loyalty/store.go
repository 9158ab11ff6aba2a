package loyalty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
)

const campaignColumns = `id, name, attrs, vouchers_count, generation_status, created_at, updated_at`

func scanCampaign(r pgx.Row) (Campaign, error) {
	var c Campaign
	var attrs []byte
	if err := r.Scan(&c.ID, &c.Name, &attrs, &c.VouchersCount, &c.GenerationStatus, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return Campaign{}, err
	}
	return c, json.Unmarshal(attrs, &c.Attrs)
}

// getCampaign finds a live campaign by id or name.
func getCampaign(ctx context.Context, q db.Querier, projectID, idOrName string) (Campaign, error) {
	c, err := scanCampaign(q.QueryRow(ctx, `SELECT `+campaignColumns+` FROM loyalty_campaigns
		WHERE project_id = $1 AND id = $2 AND deleted_at IS NULL`, projectID, idOrName))
	if errors.Is(err, pgx.ErrNoRows) {
		c, err = scanCampaign(q.QueryRow(ctx, `SELECT `+campaignColumns+` FROM loyalty_campaigns
			WHERE project_id = $1 AND name = $2 AND deleted_at IS NULL`, projectID, idOrName))
	}
	return c, err
}

func insertCampaign(ctx context.Context, q db.Querier, projectID string, c Campaign) error {
	attrs, err := json.Marshal(c.Attrs)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO loyalty_campaigns (project_id, id, name, attrs, vouchers_count, generation_status, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, projectID, c.ID, c.Name, attrs, c.VouchersCount, c.GenerationStatus, c.CreatedAt)
	return err
}

func updateCampaign(ctx context.Context, q db.Querier, projectID string, c Campaign) error {
	attrs, err := json.Marshal(c.Attrs)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `UPDATE loyalty_campaigns SET name = $3, attrs = $4, vouchers_count = $5, generation_status = $6, updated_at = $7
		WHERE project_id = $1 AND id = $2`, projectID, c.ID, c.Name, attrs, c.VouchersCount, c.GenerationStatus, c.UpdatedAt)
	return err
}

func listCampaigns(ctx context.Context, q db.Querier, projectID string, desc bool, after string, limit int) ([]Campaign, int, error) {
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM loyalty_campaigns WHERE project_id = $1 AND deleted_at IS NULL`,
		projectID).Scan(&total); err != nil {
		return nil, 0, err
	}
	cmp, dir := listq.Keyset(desc)
	sql := `SELECT ` + campaignColumns + ` FROM loyalty_campaigns WHERE project_id = $1 AND deleted_at IS NULL`
	args := []any{projectID, limit + 1}
	if after != "" {
		args = append(args, after)
		sql += " AND id " + cmp + " $3"
	}
	rows, err := q.Query(ctx, sql+" ORDER BY id "+dir+" LIMIT $2", args...)
	if err != nil {
		return nil, 0, err
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Campaign, error) { return scanCampaign(r) })
	return cs, total, err
}

const cardColumns = `id, code, campaign_id, holder_id, points, balance, subtracted_points, expired_points, redeemed_points,
	pending_points, next_expiration_date, next_expiration_points, metadata, created_at, updated_at`

func scanCard(r pgx.Row) (Card, error) {
	var c Card
	var meta []byte
	err := r.Scan(&c.ID, &c.Code, &c.CampaignID, &c.HolderID, &c.Points, &c.Balance, &c.SubtractedPoints, &c.ExpiredPoints,
		&c.RedeemedPoints, &c.PendingPoints, &c.NextExpirationDate, &c.NextExpirationPoints, &meta, &c.CreatedAt, &c.UpdatedAt)
	if err == nil && meta != nil {
		err = json.Unmarshal(meta, &c.Metadata)
	}
	return c, err
}

// getCard finds a card by code, or by id, optionally locking it.
func getCard(ctx context.Context, q db.Querier, projectID, codeOrID string, lock bool) (Card, error) {
	suffix := ""
	if lock {
		suffix = " FOR UPDATE"
	}
	c, err := scanCard(q.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards WHERE project_id = $1 AND code = $2`+suffix,
		projectID, codeOrID))
	if errors.Is(err, pgx.ErrNoRows) && strings.HasPrefix(codeOrID, "v_") {
		c, err = scanCard(q.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards WHERE project_id = $1 AND id = $2`+suffix,
			projectID, codeOrID))
	}
	return c, err
}

// saveFigures writes a card's figures after a ledger change, with its next
// expiration recomputed from its buckets.
func saveFigures(ctx context.Context, q db.Querier, projectID string, c *Card, now time.Time) error {
	var date *time.Time
	var points *int64
	err := q.QueryRow(ctx, `SELECT expires_on, sum(points) FROM loyalty_point_buckets
		WHERE project_id = $1 AND card_id = $2 AND points > 0 AND expires_on IS NOT NULL
		GROUP BY expires_on ORDER BY expires_on LIMIT 1`, projectID, c.ID).Scan(&date, &points)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	c.NextExpirationDate, c.NextExpirationPoints, c.UpdatedAt = date, points, &now
	_, err = q.Exec(ctx, `UPDATE loyalty_cards SET points = $3, balance = $4, subtracted_points = $5, expired_points = $6,
		redeemed_points = $7, pending_points = $8, next_expiration_date = $9, next_expiration_points = $10, updated_at = $11
		WHERE project_id = $1 AND id = $2`, projectID, c.ID, c.Points, c.Balance, c.SubtractedPoints, c.ExpiredPoints,
		c.RedeemedPoints, c.PendingPoints, c.NextExpirationDate, c.NextExpirationPoints, now)
	return err
}

// addBucket puts points on a card that expire on expiresOn (nil: never).
func addBucket(ctx context.Context, q db.Querier, projectID, cardID string, points int64, expiresOn *time.Time) error {
	_, err := q.Exec(ctx, `INSERT INTO loyalty_point_buckets (project_id, card_id, id, points, expires_on) VALUES ($1, $2, $3, $4, $5)`,
		projectID, cardID, ids.New("lpb_"), points, expiresOn)
	return err
}

// takeFromBuckets removes points from a card's buckets, soonest-expiring
// first; the caller has checked the balance covers them.
func takeFromBuckets(ctx context.Context, q db.Querier, projectID, cardID string, points int64) error {
	rows, err := q.Query(ctx, `SELECT id, points FROM loyalty_point_buckets WHERE project_id = $1 AND card_id = $2 AND points > 0
		ORDER BY expires_on NULLS LAST, id`, projectID, cardID)
	if err != nil {
		return err
	}
	type bucket struct {
		id     string
		points int64
	}
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (bucket, error) {
		var b bucket
		return b, r.Scan(&b.id, &b.points)
	})
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, bk := range bs {
		if points == 0 {
			break
		}
		take := min(points, bk.points)
		points -= take
		if take == bk.points {
			b.Queue(`DELETE FROM loyalty_point_buckets WHERE project_id = $1 AND card_id = $2 AND id = $3`, projectID, cardID, bk.id)
		} else {
			b.Queue(`UPDATE loyalty_point_buckets SET points = points - $4 WHERE project_id = $1 AND card_id = $2 AND id = $3`,
				projectID, cardID, bk.id, take)
		}
	}
	if points > 0 {
		return fmt.Errorf("loyalty: card %s's buckets are %d points short of its balance", cardID, points)
	}
	return q.SendBatch(ctx, b).Close()
}

func insertTransaction(ctx context.Context, q db.Querier, projectID string, t Transaction) error {
	_, err := q.Exec(ctx, `INSERT INTO loyalty_transactions (project_id, id, card_id, campaign_id, type, delta, source_id, source,
		reason, details, related_transaction_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		projectID, t.ID, t.VoucherID, t.CampaignID, t.Type, t.delta, t.SourceID, t.Source, t.Reason, []byte(t.Details),
		t.RelatedTransactionID, t.CreatedAt.Time)
	return err
}

// TxQuery selects transactions: of a card, or of a campaign.
type TxQuery struct {
	CardID, CampaignID string
	Limit              int
	Desc               bool
	StartingAfter      string
	Filter             filters.Filter
}

var txFields = map[string]filters.Field{
	"created_at": {Kind: filters.DateTime, Column: "created_at"},
	"id":         {Kind: filters.String, Column: "id"},
}

func listTransactions(ctx context.Context, q db.Querier, projectID string, tq TxQuery, now time.Time) ([]Transaction, error) {
	args := []any{projectID}
	where := "project_id = $1"
	if tq.CardID != "" {
		args = append(args, tq.CardID)
		where += " AND card_id = $2"
	} else {
		args = append(args, tq.CampaignID)
		where += " AND campaign_id = $2"
	}
	cmp, dir := listq.Keyset(tq.Desc)
	if tq.StartingAfter != "" {
		args = append(args, tq.StartingAfter)
		where += fmt.Sprintf(" AND id %s $%d", cmp, len(args))
	}
	cond, args := tq.Filter.SQL(txFields, args, now)
	args = append(args, tq.Limit+1)
	rows, err := q.Query(ctx, fmt.Sprintf(`SELECT id, source_id, card_id, campaign_id, source, reason, type, details,
		related_transaction_id, created_at FROM loyalty_transactions WHERE %s AND %s ORDER BY id %s LIMIT $%d`,
		where, cond, dir, len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Transaction, error) {
		var t Transaction
		var details []byte
		err := r.Scan(&t.ID, &t.SourceID, &t.VoucherID, &t.CampaignID, &t.Source, &t.Reason, &t.Type, &details,
			&t.RelatedTransactionID, &t.CreatedAt.Time)
		t.Details = details
		return t, err
	})
}

func listCards(ctx context.Context, q db.Querier, projectID, campaignID string, desc bool, after string, limit int) ([]Card, int, error) {
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2`,
		projectID, campaignID).Scan(&total); err != nil {
		return nil, 0, err
	}
	cmp, dir := listq.Keyset(desc)
	sql := `SELECT ` + cardColumns + ` FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2`
	args := []any{projectID, campaignID, limit + 1}
	if after != "" {
		args = append(args, after)
		sql += " AND id " + cmp + " $4"
	}
	rows, err := q.Query(ctx, sql+" ORDER BY id "+dir+" LIMIT $3", args...)
	if err != nil {
		return nil, 0, err
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Card, error) { return scanCard(r) })
	return cs, total, err
}
