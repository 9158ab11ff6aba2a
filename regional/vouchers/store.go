package vouchers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/categories"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchercodes"
)

// The columns of a voucher, with its campaign's name and its category (v
// is vouchers, c campaigns, cat categories), in scanRow's order.
var voucherColumns = `v.id, v.code, v.campaign_id, c.name, v.type, v.attrs, v.category, v.category_id, ` + categories.Columns("cat") +
	`, v.active, v.redemption_quantity, ` + redeemedColumn + `, v.holder_id, v.created_at, v.updated_at, c.campaign_type`

var voucherFrom = ` FROM vouchers v` + campaigns.LeftJoin("c", "v") + categories.LeftJoin("cat", "v", "v.category_id")

// scanRow scans voucherColumns into v, but for the attrs document, which
// it answers.
func scanRow(r pgx.Row, v *Voucher) ([]byte, error) {
	var attrs []byte
	var cat categories.Nullable
	var campaignType *string
	if err := r.Scan(append(append([]any{&v.ID, &v.Code, &v.CampaignID, &v.CampaignName, &v.Type, &attrs, &v.Category,
		&v.CategoryID}, cat.Dests()...), &v.Active, &v.Quantity, &v.Redeemed, &v.HolderID, &v.CreatedAt, &v.UpdatedAt,
		&campaignType)...); err != nil {
		return nil, err
	}
	v.Cat = cat.Get()
	v.campaignType = campaignType
	v.Referral = campaignType != nil && *campaignType == "REFERRAL_PROGRAM"
	return attrs, nil
}

func scanVoucher(r pgx.Row) (Voucher, error) {
	var v Voucher
	attrs, err := scanRow(r, &v)
	if err != nil {
		return Voucher{}, err
	}
	return v, json.Unmarshal(attrs, &v.Attrs)
}

// getVoucher finds a live voucher (not in the bin) by code, or by id.
func getVoucher(ctx context.Context, q db.Querier, projectID, codeOrID string, lock bool) (Voucher, error) {
	forUpdate := ""
	if lock {
		forUpdate = " FOR UPDATE OF v"
	}
	v, err := scanVoucher(q.QueryRow(ctx, `SELECT `+voucherColumns+voucherFrom+`
		WHERE v.project_id = $1 AND v.code = $2 AND v.bin_id IS NULL AND c.deleted_at IS NULL`+forUpdate, projectID, codeOrID))
	if errors.Is(err, db.ErrNotFound) && strings.HasPrefix(codeOrID, "v_") {
		v, err = scanVoucher(q.QueryRow(ctx, `SELECT `+voucherColumns+voucherFrom+`
			WHERE v.project_id = $1 AND v.id = $2 AND v.bin_id IS NULL AND c.deleted_at IS NULL`+forUpdate, projectID, codeOrID))
	}
	if errors.Is(err, db.ErrNotFound) {
		return Voucher{}, apierr.NotFound("voucher", codeOrID)
	}
	return v, err
}

// Locked reads, locked in tx, the live voucher with code (or else id): a
// 404 when there is none.
func Locked(ctx context.Context, tx pgx.Tx, projectID, codeOrID string) (Voucher, error) {
	return getVoucher(ctx, tx, projectID, codeOrID, true)
}

// QueueAttrs queues onto b the write of v's attrs, changed at now; the
// caller holds v locked.
func QueueAttrs(b *pgx.Batch, projectID string, v Voucher, now time.Time) error {
	attrs, err := json.Marshal(v.Attrs)
	if err != nil {
		return err
	}
	b.Queue(`UPDATE vouchers SET attrs = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`, projectID, v.ID, attrs, now)
	return nil
}

// registerCode takes a code in the project's registry of codes, shared by
// every voucher type; a taken code is 409.
func registerCode(ctx context.Context, q db.Querier, h vouchercodes.Held) error {
	took, err := vouchercodes.Take(ctx, q, h)
	if err != nil {
		return err
	}
	if !took {
		return errCodeTaken(h.Code)
	}
	return nil
}

func errCodeTaken(code string) error {
	return apierr.Duplicate("voucher", fmt.Sprintf("A voucher or loyalty card with code %q already exists in this project.", code))
}

func insertVoucher(ctx context.Context, q db.Querier, projectID string, v Voucher) error {
	attrs, err := json.Marshal(v.Attrs)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO vouchers (project_id, id, code, campaign_id, type, attrs, category, category_id, active,
		redemption_quantity, holder_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		projectID, v.ID, v.Code, v.CampaignID, v.Type, attrs, v.Category, v.CategoryID, v.Active, v.Quantity, v.HolderID, v.CreatedAt)
	if errors.Is(err, db.ErrConflict) {
		return errCodeTaken(v.Code)
	}
	return err
}

func updateVoucher(ctx context.Context, q db.Querier, projectID string, v Voucher) error {
	attrs, err := json.Marshal(v.Attrs)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE vouchers SET attrs = $3, category = $4, category_id = $5, active = $6, redemption_quantity = $7,
		updated_at = $8 WHERE project_id = $1 AND id = $2`, projectID, v.ID, attrs, v.Category, v.CategoryID, v.Active, v.Quantity, v.UpdatedAt)
	queueTakeBackQuotas(b, projectID, v.ID) // the quantity may have changed
	return q.SendBatch(ctx, b).Close()
}

// InsertMany writes vouchers in two statements (their codes in the
// registry, then the vouchers whose codes were free) and the gift cards'
// opening entries; it answers the ids written (a voucher
// whose code was taken is not). An import's chunk (regional/vouchers/bulk)
// goes in with it.
func InsertMany(ctx context.Context, tx pgx.Tx, projectID string, vs []Voucher) (map[string]bool, error) {
	made := map[string]bool{}
	if len(vs) == 0 {
		return made, nil
	}
	n := len(vs)
	vids, codes, types, attrs, cats, catIDs, camps := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]*string, n), make([]*string, n), make([]*string, n)
	active, quantity := make([]bool, n), make([]*int64, n)
	for i, v := range vs {
		a, err := json.Marshal(v.Attrs)
		if err != nil {
			return nil, err
		}
		vids[i], codes[i], types[i], attrs[i], cats[i], catIDs[i], camps[i], active[i], quantity[i] = v.ID, v.Code, v.Type, string(a),
			v.Category, v.CategoryID, v.CampaignID, v.Active, v.Quantity
	}
	rows, err := tx.Query(ctx, vouchercodes.Reserve(1, 2, 3)+`INSERT INTO vouchers (project_id, id, code, campaign_id, type, attrs, category, category_id, active, redemption_quantity, created_at)
			SELECT $1, x.id, x.code, x.campaign_id, x.type, x.attrs::JSONB, x.category, x.category_id, x.active, x.quantity, $10
			FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], $11::TEXT[], $8::BOOL[], $9::INT8[])
				AS x(id, code, campaign_id, type, attrs, category, category_id, active, quantity)
			WHERE x.id IN (SELECT voucher_id FROM reg)
		RETURNING id`, projectID, vids, codes, camps, types, attrs, cats, active, quantity, vs[0].CreatedAt, catIDs)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, id := range got {
		made[id] = true
	}
	// Gift cards open with their amounts: one statement per amount.
	b := &pgx.Batch{}
	byAmount := map[int64][]string{}
	campOf := map[int64]string{}
	details := map[int64][]byte{}
	for _, v := range vs {
		if g := v.Attrs.Gift; made[v.ID] && g != nil && g.Amount > 0 {
			byAmount[g.Amount] = append(byAmount[g.Amount], v.ID)
			if v.CampaignID != nil {
				campOf[g.Amount] = *v.CampaignID
			}
			details[g.Amount] = openingDetails(v)
		}
	}
	for amount, idsOf := range byAmount {
		loyalty.QueueOpeningEntries(b, projectID, campOf[amount], idsOf, amount, details[amount], vs[0].CreatedAt)
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	}
	return made, nil
}

// Generate makes n vouchers of a campaign from its template in one
// statement per chunk: codes taken in the registry (by any voucher or
// card) are skipped and made again in the next round. It returns how many
// it made.
func Generate(ctx context.Context, q db.Querier, projectID string, c Campaign, next func() string, n int64, now time.Time) (int64, error) {
	v := c.Attrs.Voucher.voucher(c, "", now)
	attrs, err := json.Marshal(v.Attrs)
	if err != nil {
		return 0, err
	}
	var made int64
	for tries := 0; made < n; tries++ {
		if tries > 50 {
			return made, errors.New("vouchers: code space too crowded to generate vouchers")
		}
		chunk := min(n-made, 5000)
		codes, vids := make([]string, chunk), make([]string, chunk)
		for i := range codes {
			codes[i], vids[i] = next(), ids.New("v_")
		}
		rows, err := q.Query(ctx, vouchercodes.Reserve(1, 2, 3)+`INSERT INTO vouchers (project_id, id, code, campaign_id, type, attrs, category, category_id, active, redemption_quantity, created_at)
				SELECT $1, reg.voucher_id, reg.code, $4, $5, $6, $7, $10, true, $8, $9 FROM reg
				ON CONFLICT (project_id, code) DO NOTHING RETURNING id`, projectID, vids, codes, c.ID, v.Type, attrs, v.Category, v.Quantity, now,
			v.CategoryID)
		if err != nil {
			return made, err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return made, err
		}
		// A gift card opens with its amount, as an entry of the ledger.
		if g := v.Attrs.Gift; g != nil && g.Amount > 0 && len(got) > 0 {
			b := &pgx.Batch{}
			loyalty.QueueOpeningEntries(b, projectID, c.ID, got, g.Amount, openingDetails(v), now)
			if err := q.SendBatch(ctx, b).Close(); err != nil {
				return made, err
			}
		}
		made += int64(len(got))
	}
	return made, nil
}

var listFields = map[string]filters.Field{
	"id":          {Kind: filters.String, Column: "v.id"},
	"code":        {Kind: filters.String, Column: "v.code"},
	"campaign_id": {Kind: filters.String, Column: "v.campaign_id"},
	"category":    {Kind: filters.String, Column: categoryName},
	"holder_id":   {Kind: filters.String, Column: "v.holder_id"},
	"type":        {Kind: filters.String, Column: "v.type"},
	"created_at":  {Kind: filters.DateTime, Column: "v.created_at"},
	"updated_at":  {Kind: filters.DateTime, Column: "v.updated_at"},
}

// ListQuery is a parsed GET /v1/vouchers.
type ListQuery struct {
	listq.Query
	CampaignID                       string
	Category                         string
	campaigns.VoucherFilter          // holder, code, ids, creation and update bounds, as a program's members
	Filter                           filters.Filter
	campaignName                     string
	campaignByName, campaignResolved bool
}

func listVouchers(ctx context.Context, q db.Querier, projectID string, lq ListQuery, now time.Time) ([]Voucher, int, error) {
	args := []any{projectID}
	cond := ""
	add := func(sql string, v any) {
		args = append(args, v)
		cond += fmt.Sprintf(" AND "+sql, len(args))
	}
	if lq.CampaignID != "" {
		add("v.campaign_id = $%d", lq.CampaignID)
	}
	if lq.Category != "" {
		add(categoryName+" = $%d", lq.Category)
	}
	lq.VoucherFilter.Where("v.", add)
	if !lq.Filter.Empty() {
		var f string
		f, args = lq.Filter.SQL(listFields, args, now)
		cond += " AND " + f
	}
	where := ` WHERE v.project_id = $1 AND v.bin_id IS NULL AND c.deleted_at IS NULL` + cond
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*)`+voucherFrom+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	key := map[string]string{"created_at": "v.id", "id": "v.id", "code": "v.code",
		"updated_at": "COALESCE(v.updated_at, v.created_at)"}[lq.Key]
	if key == "" {
		key = "v.id"
	}
	args = append(args, lq.Limit+1)
	limit := fmt.Sprintf("$%d", len(args))
	kcond, orderBy := "", ""
	cmp, dir := listq.Keyset(lq.Desc)
	if key == "v.id" {
		orderBy = "v.id " + dir
	} else {
		orderBy = key + " " + dir + ", v.id " + dir
	}
	if lq.After != "" {
		args = append(args, lq.After)
		p := fmt.Sprintf("$%d", len(args))
		if key == "v.id" {
			kcond = " AND v.id " + cmp + " " + p
		} else {
			inner := strings.ReplaceAll(key, "v.", "w.")
			kcond = fmt.Sprintf(" AND (%s, v.id) %s (SELECT %s, w.id FROM vouchers w WHERE w.project_id = $1 AND w.id = %s)",
				key, cmp, inner, p)
		}
	}
	vs, err := db.Collect(scanVoucher)(q.Query(ctx, `SELECT `+voucherColumns+voucherFrom+where+kcond+
		` ORDER BY `+orderBy+` LIMIT `+limit+lq.OffsetSQL(), args...))
	return vs, total, err
}

// queueLockVoucher queues locking and reading a live voucher by code, or
// else by id, into b (the batch that begins a piped transaction); found
// tells whether there was one.
func queueLockVoucher(b *pgx.Batch, projectID, codeOrID string, dst *Voucher, found *bool) {
	queueVoucher(b, projectID, codeOrID, true, dst, found)
}

// queueVoucher is queueLockVoucher that locks only when lock is set.
func queueVoucher(b *pgx.Batch, projectID, codeOrID string, lock bool, dst *Voucher, found *bool) {
	queueVoucherWhere(b, projectID, codeOrID, map[bool]string{true: ` FOR UPDATE OF v`}[lock], dst, found)
}

// queueVoucherWhere is queueVoucher with more of the statement after its
// condition (a further condition, a locking clause).
func queueVoucherWhere(b *pgx.Batch, projectID, codeOrID, more string, dst *Voucher, found *bool) {
	b.Queue(`SELECT `+voucherColumns+voucherFrom+` WHERE v.project_id = $1 AND v.bin_id IS NULL AND c.deleted_at IS NULL AND v.id = COALESCE(
			(SELECT w.id FROM vouchers w WHERE w.project_id = $1 AND w.code = $2 AND w.bin_id IS NULL),
			(SELECT w.id FROM vouchers w WHERE w.project_id = $1 AND w.id = $2 AND w.bin_id IS NULL))`+
		more, projectID, codeOrID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			v, err := scanVoucher(rows)
			if err != nil {
				return err
			}
			*dst, *found = v, true
		}
		return rows.Err()
	})
}

// CountOfCampaign counts a campaign's vouchers.
func CountOfCampaign(ctx context.Context, q db.Querier, projectID, campaignID string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM vouchers WHERE project_id = $1 AND campaign_id = $2`, projectID, campaignID).Scan(&n)
	return n, err
}

// CountOfCampaignWithin counts a campaign's vouchers made within p.
func CountOfCampaignWithin(ctx context.Context, q db.Querier, projectID, campaignID string, p campaigns.Period) (int64, error) {
	return p.Count(ctx, q, `SELECT count(*) FROM vouchers WHERE project_id = $1 AND campaign_id = $2`, "created_at", projectID, campaignID)
}

// dropVouchers deletes up to limit vouchers of a deleted campaign for
// good, with their codes and ledger entries, and answers how many it
// deleted.
func dropVouchers(ctx context.Context, tx pgx.Tx, projectID, campaignID string, limit int) (int64, error) {
	var ids, codes []string
	rows, err := tx.Query(ctx, `SELECT id, code FROM vouchers WHERE project_id = $1 AND campaign_id = $2 ORDER BY id LIMIT $3`,
		projectID, campaignID, limit)
	if err != nil {
		return 0, err
	}
	var id, code string
	if _, err := pgx.ForEachRow(rows, []any{&id, &code}, func() error {
		ids, codes = append(ids, id), append(codes, code)
		return nil
	}); err != nil || len(ids) == 0 {
		return 0, err
	}
	b := &pgx.Batch{}
	vouchercodes.QueueFree(b, projectID, ids, codes)
	b.Queue(`DELETE FROM vouchers WHERE project_id = $1 AND id = ANY($2::TEXT[])`, projectID, ids)
	loyalty.QueueDropEntries(b, projectID, ids)
	return int64(len(ids)), tx.SendBatch(ctx, b).Close()
}
