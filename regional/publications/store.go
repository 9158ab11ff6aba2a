package publications

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
)

const columns = `id, campaign_id, campaign_name, voucher_id, voucher_code, voucher_type, is_referral_code, customer_id,
	tracking_id, channel, source_id, result, failure_code, failure_message, metadata, join_once_campaign, created_at`

func scan(r pgx.Row) (Publication, error) {
	var p Publication
	var meta []byte
	if err := r.Scan(&p.ID, &p.CampaignID, &p.CampaignName, &p.VoucherID, &p.VoucherCode, &p.VoucherType, &p.IsReferralCode,
		&p.CustomerID, &p.TrackingID, &p.Channel, &p.SourceID, &p.Result, &p.FailureCode, &p.FailureMessage, &meta,
		&p.JoinOnce, &p.CreatedAt); err != nil {
		return Publication{}, err
	}
	return p, json.Unmarshal(meta, &p.Metadata)
}

func insert(ctx context.Context, q db.Querier, projectID string, p Publication) error {
	meta := p.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	mb, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO publications (project_id, id, campaign_id, campaign_name, voucher_id, voucher_code,
		voucher_type, is_referral_code, customer_id, tracking_id, channel, source_id, result, failure_code, failure_message,
		metadata, join_once_campaign, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
		projectID, p.ID, p.CampaignID, p.CampaignName, p.VoucherID, p.VoucherCode, p.VoucherType, p.IsReferralCode,
		p.CustomerID, p.TrackingID, p.Channel, p.SourceID, p.Result, p.FailureCode, p.FailureMessage, mb, p.JoinOnce, p.CreatedAt)
	return err
}

// vouchersOf reads the vouchers of publications of several, by
// publication id, in the order they were given.
func vouchersOf(ctx context.Context, q db.Querier, projectID string, pubIDs []string) (map[string][]given, error) {
	out := map[string][]given{}
	if len(pubIDs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT publication_id, voucher_id, voucher_code FROM publication_vouchers
		WHERE project_id = $1 AND publication_id = ANY($2::TEXT[]) ORDER BY publication_id, position`, projectID, pubIDs)
	if err != nil {
		return nil, err
	}
	var pid string
	var g given
	_, err = pgx.ForEachRow(rows, []any{&pid, &g.ID, &g.Code}, func() error {
		out[pid] = append(out[pid], g)
		return nil
	})
	return out, err
}

// PublishCounts counts the successful publications of each of the
// vouchers ids (whose codes are codes), by id: a code freed from a removed
// voucher and taken again does not take its publications along
// (vouchers.PublishCounts, given to vouchers.NewService).
func PublishCounts(ctx context.Context, q db.Querier, projectID string, ids, codes []string) (map[string]int64, error) {
	out := map[string]int64{}
	rows, err := q.Query(ctx, `SELECT voucher_id, count(*) FROM (
			SELECT voucher_id FROM publications WHERE project_id = $1 AND voucher_code = ANY($2::TEXT[]) AND voucher_id = ANY($3::TEXT[])
				AND result = 'SUCCESS'
			UNION ALL SELECT voucher_id FROM publication_vouchers WHERE project_id = $1 AND voucher_code = ANY($2::TEXT[])
				AND voucher_id = ANY($3::TEXT[])) AS p
		GROUP BY voucher_id`, projectID, codes, ids)
	if err != nil {
		return nil, err
	}
	var id string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		out[id] = n
		return nil
	})
	return out, err
}

var listFields = map[string]filters.Field{
	"id": {Kind: filters.String, Column: "id"},
	// A publication of several vouchers keeps their codes in
	// publication_vouchers: it matches when one of them does.
	"voucher_code": {Kind: filters.String, Column: "voucher_code", AlsoColumn: "pv.voucher_code",
		Also: `EXISTS (SELECT 1 FROM publication_vouchers pv WHERE pv.project_id = publications.project_id
			AND pv.publication_id = publications.id AND %s)`},
	"campaign_id":   {Kind: filters.String, Column: "campaign_id"},
	"campaign_name": {Kind: filters.String, Column: "campaign_name"},
	"customer_id":   {Kind: filters.String, Column: "customer_id"},
	"tracking_id":   {Kind: filters.String, Column: "tracking_id"},
	"channel":       {Kind: filters.String, Column: "channel"},
	"source_id":     {Kind: filters.String, Column: "source_id"},
	"result":        {Kind: filters.String, Column: "result"},
	"failure_code":  {Kind: filters.String, Column: "failure_code"},
	"voucher_type":  {Kind: filters.String, Column: "voucher_type"},
	"created_at":    {Kind: filters.DateTime, Column: "created_at"},
}

// orderKeys are the list's order keys and the expressions they sort by
// (id breaks ties; created_at is id's order, ids being time-ordered).
var orderKeys = map[string]string{"id": "id", "created_at": "id", "voucher_code": "COALESCE(voucher_code, '')",
	"tracking_id": "COALESCE(tracking_id, '')", "customer_id": "customer_id", "channel": "channel"}

// ListQuery is a parsed GET /v1/publications.
type ListQuery struct {
	listq.Query
	Campaign, Customer, Voucher, Result, VoucherType, SourceID string
	ReferralOnly                                               bool
	Filter                                                     filters.Filter
}

func list(ctx context.Context, q db.Querier, projectID string, lq ListQuery, now time.Time) ([]Publication, int, error) {
	args := []any{projectID}
	cond := ""
	add := func(sql string, v any) {
		args = append(args, v)
		cond += fmt.Sprintf(" AND "+sql, len(args))
	}
	if lq.Campaign != "" { // the reference filters by name; an id is accepted too
		args = append(args, lq.Campaign)
		cond += fmt.Sprintf(" AND (campaign_name = $%d OR campaign_id = $%d)", len(args), len(args))
	}
	if lq.Customer != "" {
		add("customer_id = $%d", lq.Customer)
	}
	if lq.Voucher != "" { // its publication of one, or a publication of several holding it
		args = append(args, lq.Voucher)
		cond += fmt.Sprintf(` AND (voucher_code = $%d OR id IN (SELECT publication_id FROM publication_vouchers
			WHERE project_id = $1 AND voucher_code = $%d))`, len(args), len(args))
	}
	if lq.Result != "" {
		add("result = $%d", lq.Result)
	}
	if lq.VoucherType != "" {
		add("voucher_type = ANY($%d::TEXT[])", map[string][]string{"discount": {"DISCOUNT_VOUCHER", "GIFT_VOUCHER"},
			"loyalty": {"LOYALTY_CARD"}}[lq.VoucherType])
	}
	if lq.SourceID != "" {
		add("source_id = $%d", lq.SourceID)
	}
	if lq.ReferralOnly {
		cond += " AND is_referral_code"
	}
	if !lq.Filter.Empty() {
		var f string
		f, args = lq.Filter.SQL(listFields, args, now)
		cond += " AND " + f
	}
	where := ` WHERE project_id = $1` + cond
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM publications`+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	args = append(args, lq.Limit+1)
	limit := fmt.Sprintf("$%d", len(args))
	kcond, orderBy, args := lq.Keyset("publications", orderKeys[lq.Key], args)
	ps, err := db.Collect(scan)(q.Query(ctx, `SELECT `+columns+` FROM publications`+where+kcond+
		` ORDER BY `+orderBy+` LIMIT `+limit+lq.OffsetSQL(), args...))
	return ps, total, err
}

// Counts are a campaign's publications within p: succeeded and failed.
func (s *Service) Counts(ctx context.Context, projectID, campaignID string, p campaigns.Period) (ok, failed int64, err error) {
	for _, c := range []struct {
		result string
		n      *int64
	}{{Success, &ok}, {Failure, &failed}} {
		if *c.n, err = p.Count(ctx, s.pool, `SELECT count(*) FROM publications
			WHERE project_id = $1 AND campaign_id = $2 AND result = $3`, "created_at", projectID, campaignID, c.result); err != nil {
			return 0, 0, err
		}
	}
	return ok, failed, nil
}
