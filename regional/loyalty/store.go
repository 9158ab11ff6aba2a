package loyalty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/tiers"
	"github.com/tallyhq/tally/regional/vouchercodes"
)

// CampaignPart is a table of rows that belong to a campaign: its earning
// rules, reward assignments or tiers.
type CampaignPart[T any] struct {
	table, columns, resource string
	scan                     func(pgx.Row) (T, error)
}

// Get reads the row ref names, of a live campaign (by id or name), locked
// when lock is set; a row of another or no campaign is the resource's 404.
func (p CampaignPart[T]) Get(ctx context.Context, s *Service, q db.Querier, ref campaigns.ItemRef, lock bool) (T, error) {
	var zero T
	camp, err := s.Campaign(ctx, q, ref.Project, ref.Campaign)
	if err != nil {
		return zero, err
	}
	v, err := p.scan(q.QueryRow(ctx, `SELECT `+p.columns+` FROM `+p.table+` WHERE project_id = $1 AND id = $2 AND campaign_id = $3`+
		db.ForUpdate(lock), ref.Project, ref.ID, camp.ID))
	if errors.Is(err, db.ErrNotFound) {
		return zero, apierr.NotFound(p.resource, ref.ID)
	}
	return v, err
}

// getCampaign finds a live loyalty program by id or name.
func getCampaign(ctx context.Context, q db.Querier, projectID, idOrName string) (Campaign, error) {
	c, err := campaigns.Get[VoucherConfig](ctx, q, projectID, idOrName, false, "LOYALTY_PROGRAM")
	return Campaign{Campaign: c}, err
}

const cardColumns = `id, code, campaign_id, holder_id, points, balance, subtracted_points, expired_points, redeemed_points,
	pending_points, next_expiration_date, next_expiration_points, metadata, created_at, updated_at`

// cardDests are the scan destinations of cardColumns.
func cardDests(c *Card, meta *[]byte) []any {
	return []any{&c.ID, &c.Code, &c.CampaignID, &c.HolderID, &c.Points, &c.Balance, &c.SubtractedPoints, &c.ExpiredPoints,
		&c.RedeemedPoints, &c.PendingPoints, &c.NextExpirationDate, &c.NextExpirationPoints, meta, &c.CreatedAt, &c.UpdatedAt}
}

func scanCard(r pgx.Row) (Card, error) {
	var c Card
	var meta []byte
	err := r.Scan(cardDests(&c, &meta)...)
	if err == nil && meta != nil {
		err = json.Unmarshal(meta, &c.Metadata)
	}
	return c, err
}

// getCard finds a card by code, or by id, optionally locking it.
func getCard(ctx context.Context, q db.Querier, projectID, codeOrID string, lock bool) (Card, error) {
	return scanCard(q.QueryRow(ctx, `SELECT `+cardColumns+` FROM loyalty_cards c WHERE c.project_id = $1 AND `+CardKeyed(codeOrID)+
		db.ForUpdate(lock), projectID, codeOrID))
}

// cardColumnsC and campaignColumnsK are a card's columns and its
// campaign's, qualified with the aliases the card reads give them.
var cardColumnsC, campaignColumnsK = prefixed("c", cardColumns), campaigns.Columns("k")

func prefixed(a, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = a + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// cardIDOf is the id of the card of project $1 whose code, or else id, is
// $2 (see CardKeyed). Each arm is a lookup on a unique index: no OR for the
// planner to misjudge (with an OR, stale statistics led PostgreSQL through
// all of a campaign's cards).
const cardIDOf = `(SELECT id FROM (
		SELECT id, 0 AS o FROM loyalty_cards WHERE project_id = $1 AND code = $2
		UNION ALL SELECT id, 1 FROM loyalty_cards WHERE project_id = $1 AND id = $2) AS m ORDER BY o LIMIT 1)`

// liveCardOf is the id of that card when its campaign is live and, when $3
// is not empty, is the campaign with id or name $3.
var liveCardOf = `(SELECT c.id FROM loyalty_cards c` + campaigns.JoinLive("k", "c") + `
		WHERE c.project_id = $1 AND c.id = ` + cardIDOf + ` AND ($3 = '' OR k.id = $3 OR k.name = $3))`

// CardKeyed is the condition on loyalty_cards c that finds the card a
// request names by key ($2): its code, or else its id. Only a key that may be
// an id (v_…) needs cardIDOf's second probe and sort; a code is matched on
// its unique index directly, which kept point additions 25-35 % faster than
// cardIDOf for every key did (1,637-2,001/s against 1,276-1,300/s).
func CardKeyed(key string) string {
	if strings.HasPrefix(key, "v_") {
		return "c.id = " + cardIDOf
	}
	return "c.code = $2"
}

// CardColumnKeyed is the subquery reading col of the project $1's card
// named by key ($2, as CardKeyed finds it): a card's column read by
// another owner's statement in its own round trip (a reward assignment of
// the card's campaign, the card's holder).
func CardColumnKeyed(col, key string) string {
	return `(SELECT ` + col + ` FROM loyalty_cards c WHERE c.project_id = $1 AND ` + CardKeyed(key) + `)`
}

// LeftJoinCard is the LEFT JOIN, as alias, of the card idSQL names in the
// project of the rows owner: a card's columns beside another owner's rows
// (a loyalty redemption's card code in the redemption export).
func LeftJoinCard(alias, owner, idSQL string) string {
	return ` LEFT JOIN loyalty_cards ` + alias + ` ON ` + alias + `.project_id = ` + owner + `.project_id AND ` + alias + `.id = ` + idSQL
}

// lockCardSQL locks the card named by $2 (CardKeyed) and reads it with its
// live campaign, the campaign's tiers (tiers.Column) and what its tier
// events earn (earnCol), which must be the campaign with id or name $3 when
// $3 is not empty.
func lockCardSQL(key, earnCol string) string {
	return readCardSQL(key, earnCol) + ` FOR UPDATE OF c`
}

// readCardSQL is lockCardSQL without the lock.
func readCardSQL(key, earnCol string) string {
	return `SELECT ` + cardColumnsC + `, ` + campaignColumnsK + `, ` + tiers.Column + `, ` + earnCol + `
		FROM loyalty_cards c` + campaigns.JoinLive("k", "c") + `
		WHERE c.project_id = $1 AND ` + CardKeyed(key) + ` AND ($3 = '' OR k.id = $3 OR k.name = $3)`
}

// LockedCard is a card and its live campaign read under the card's lock.
type LockedCard struct {
	Card
	Campaign Campaign
	Found    bool
}

// attrsCache keeps campaigns' parsed attrs, reused for as long as the
// stored bytes are the same: a busy card's every operation would otherwise
// parse its campaign again. What it hands out is shared: read only.
//
// It also carries the column of tier earning (TierEarning.Column) that is
// read with every card beside its campaign and tiers: both go wherever a
// card is read.
type attrsCache struct {
	c       *lru.Cache[string, parsedAttrs]
	earnCol string
}

type parsedAttrs struct {
	raw   []byte
	attrs Attrs
}

func newAttrsCache(size int, earnCol string) attrsCache {
	c, err := lru.New[string, parsedAttrs](size)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return attrsCache{c, earnCol}
}

// parse returns the attrs stored as raw for campaign id.
func (a attrsCache) parse(id string, raw []byte) (Attrs, error) {
	if p, ok := a.c.Get(id); ok && bytes.Equal(p.raw, raw) {
		return p.attrs, nil
	}
	var attrs Attrs
	if err := json.Unmarshal(raw, &attrs); err != nil {
		return Attrs{}, err
	}
	a.c.Add(id, parsedAttrs{raw: raw, attrs: attrs})
	return attrs, nil
}

// queueLockCard queues the read that locks the card with code or id key of
// a live campaign (ref.Campaign, its id or name, when not empty) into dst,
// and the campaign's tiers; dst.Found says whether there was one.
func queueLockCard(b *pgx.Batch, cache attrsCache, ref CardRef, dst *LockedCard) {
	queueCard(b, cache, lockCardSQL(ref.Member, cache.earnCol), ref, dst)
}

func queueCard(b *pgx.Batch, cache attrsCache, sql string, ref CardRef, dst *LockedCard) {
	b.Queue(sql, ref.Project, ref.Member, ref.Campaign).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := scanLocked(rows, cache, dst); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// scanLocked reads a row of lockedCardSQL's columns into dst.
func scanLocked(rows pgx.Rows, cache attrsCache, dst *LockedCard) error {
	var meta, attrs, tierCol []byte
	k := &dst.Campaign
	dests := append(append(cardDests(&dst.Card, &meta), campaigns.Dests(&k.Campaign, &attrs)...), &tierCol, &k.tierEarning)
	if err := rows.Scan(dests...); err != nil {
		return err
	}
	if meta != nil {
		if err := json.Unmarshal(meta, &dst.Metadata); err != nil {
			return err
		}
	}
	var err error
	if k.Attrs, err = cache.parse(k.ID, attrs); err != nil {
		return err
	}
	if k.Tiers, err = tiers.Parse(tierCol); err != nil {
		return err
	}
	dst.Found = true
	return nil
}

// Bucket is points on a card that expire together. A card has one bucket
// per expiration date (and one for points that never expire), so its
// bucket count stays small however many additions it takes.
type Bucket struct {
	ID        string
	Points    int64
	ExpiresOn *time.Time
}

// bucketID names the bucket of points expiring on exp (nil: never).
func bucketID(exp *time.Time) string {
	if exp == nil {
		return "never"
	}
	return exp.Format(time.DateOnly)
}

// queueAddBucket queues putting points on a card's bucket for exp, at now.
func queueAddBucket(b *pgx.Batch, projectID, cardID string, points int64, exp *time.Time, now time.Time) {
	b.Queue(`INSERT INTO loyalty_point_buckets (project_id, card_id, id, points, expires_on, created_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (project_id, card_id, id) DO UPDATE SET points = loyalty_point_buckets.points + excluded.points,
		updated_at = excluded.created_at`,
		projectID, cardID, bucketID(exp), points, exp, now)
}

// queueBuckets queues reading the non-empty buckets of the card whose code
// or id is key, soonest-expiring first, into dst. Queued after
// queueLockCard in one batch, it reads them under the card's lock.
func queueBuckets(b *pgx.Batch, projectID, key string, dst *[]Bucket) {
	b.Queue(`SELECT id, points, expires_on FROM loyalty_point_buckets
		WHERE project_id = $1 AND card_id = (SELECT c.id FROM loyalty_cards c WHERE c.project_id = $1 AND `+CardKeyed(key)+`) AND points > 0
		ORDER BY expires_on NULLS LAST, id`, projectID, key).Query(func(rows pgx.Rows) error {
		bs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Bucket])
		*dst = bs
		return err
	})
}

// queueTake queues taking points from a card's buckets, soonest-expiring
// first, and returns what is left of them; the caller has checked that the
// balance covers the points.
func queueTake(b *pgx.Batch, projectID, cardID string, bs []Bucket, points int64, now time.Time) ([]Bucket, error) {
	var rest []Bucket
	for _, bk := range bs {
		take := min(points, bk.Points)
		points -= take
		switch {
		case take == 0:
			rest = append(rest, bk)
		case take == bk.Points:
			b.Queue(`DELETE FROM loyalty_point_buckets WHERE project_id = $1 AND card_id = $2 AND id = $3`, projectID, cardID, bk.ID)
		default:
			b.Queue(`UPDATE loyalty_point_buckets SET points = points - $4, updated_at = $5 WHERE project_id = $1 AND card_id = $2 AND id = $3`,
				projectID, cardID, bk.ID, take, now)
			bk.Points -= take
			rest = append(rest, bk)
		}
	}
	if points > 0 {
		return nil, fmt.Errorf("loyalty: card %s's buckets are %d points short of its balance", cardID, points)
	}
	return rest, nil
}

// expireFrom sets the card's next expiration from its buckets.
func (c *Card) expireFrom(bs []Bucket) {
	c.NextExpirationDate, c.NextExpirationPoints = nil, nil
	for _, bk := range bs {
		if bk.ExpiresOn == nil || bk.Points == 0 {
			continue
		}
		switch {
		case c.NextExpirationDate == nil || bk.ExpiresOn.Before(*c.NextExpirationDate):
			c.NextExpirationDate, c.NextExpirationPoints = bk.ExpiresOn, ptr(bk.Points)
		case bk.ExpiresOn.Equal(*c.NextExpirationDate):
			*c.NextExpirationPoints += bk.Points
		}
	}
}

// expireAlso sets the card's next expiration after points expiring on exp
// (nil: never) are added: the sooner of what it was and exp.
func (c *Card) expireAlso(points int64, exp *time.Time) {
	switch {
	case exp == nil:
	case c.NextExpirationDate == nil || exp.Before(*c.NextExpirationDate):
		c.NextExpirationDate, c.NextExpirationPoints = exp, ptr(points)
	case exp.Equal(*c.NextExpirationDate):
		c.NextExpirationPoints = ptr(*c.NextExpirationPoints + points)
	}
}

// queueFigures queues writing a card's figures after a ledger change.
func queueFigures(b *pgx.Batch, projectID string, c *Card) {
	b.Queue(`UPDATE loyalty_cards SET points = $3, balance = $4, subtracted_points = $5, expired_points = $6,
		redeemed_points = $7, pending_points = $8, next_expiration_date = $9, next_expiration_points = $10, updated_at = $11
		WHERE project_id = $1 AND id = $2`, projectID, c.ID, c.Points, c.Balance, c.SubtractedPoints, c.ExpiredPoints,
		c.RedeemedPoints, c.PendingPoints, c.NextExpirationDate, c.NextExpirationPoints, c.UpdatedAt)
}

// queueTransaction queues writing a ledger entry.
func queueTransaction(b *pgx.Batch, projectID string, t Transaction) {
	b.Queue(`INSERT INTO loyalty_transactions (project_id, id, card_id, campaign_id, type, delta, source_id, source,
		reason, details, related_transaction_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		projectID, t.ID, t.VoucherID, t.CampaignID, t.Type, t.Delta, t.SourceID, t.Source, t.Reason, []byte(t.Details),
		t.RelatedTransactionID, t.CreatedAt.Time)
}

// TxQuery selects transactions: of a card (Member, its code or id, of a
// live campaign and, when Campaign is set, of that one), or of a live
// campaign (Campaign, its id or name).
type TxQuery struct {
	listq.Query
	Member, Campaign string
	Filter           filters.Filter
}

var txFields = map[string]filters.Field{
	"created_at": {Kind: filters.DateTime, Column: "created_at"},
	"id":         {Kind: filters.String, Column: "id"},
}

func listTransactions(ctx context.Context, q db.Querier, projectID string, tq TxQuery, now time.Time) ([]Transaction, error) {
	// The card or campaign is resolved in the same statement: a page is
	// one round trip.
	var args []any
	var where string
	if tq.Member != "" {
		args = []any{projectID, tq.Member, tq.Campaign}
		where = `project_id = $1 AND card_id = ` + liveCardOf
	} else {
		args = []any{projectID, tq.Campaign}
		where = `project_id = $1 AND campaign_id = ` + campaigns.LiveIDOf("LOYALTY_PROGRAM")
	}
	return pageOfTransactions(ctx, q, tq, where, args, now)
}

// pageOfTransactions reads a page of ledger entries matching where (over
// args, the project as $1), with tq's cursor, filters and limit (one more
// row than the page, for listq.Page).
func pageOfTransactions(ctx context.Context, q db.Querier, tq TxQuery, where string, args []any, now time.Time) ([]Transaction, error) {
	after, orderBy, args := tq.Keyset("loyalty_transactions", "id", args)
	where += after
	cond, args := tq.Filter.SQL(txFields, args, now)
	args = append(args, tq.Limit+1)
	rows, err := q.Query(ctx, fmt.Sprintf(`SELECT `+txColumns+` FROM loyalty_transactions WHERE %s AND %s ORDER BY %s LIMIT $%d`,
		where, cond, orderBy, len(args)), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanTransaction)
}

// txColumns are the columns of a ledger entry that scanTransaction reads.
const txColumns = `id, source_id, card_id, campaign_id, source, reason, type, details, related_transaction_id, created_at, delta`

func scanTransaction(r pgx.CollectableRow) (Transaction, error) {
	var t Transaction
	var details []byte
	err := r.Scan(&t.ID, &t.SourceID, &t.VoucherID, &t.CampaignID, &t.Source, &t.Reason, &t.Type, &details,
		&t.RelatedTransactionID, &t.CreatedAt.Time, &t.Delta)
	t.Details = details
	return t, err
}

func listCards(ctx context.Context, q db.Querier, projectID, campaignID string, f MemberFilter, lq listq.Query) ([]Card, int, error) {
	where, args := ` WHERE project_id = $1 AND campaign_id = $2`, []any{projectID, campaignID}
	add := func(sql string, v any) {
		args = append(args, v)
		where += fmt.Sprintf(" AND "+sql, len(args))
	}
	f.Where("", add)
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM loyalty_cards`+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	args = append(args, lq.Limit+1)
	limit := fmt.Sprintf("$%d", len(args))
	cond, orderBy, args := lq.Keyset("loyalty_cards", "id", args)
	cs, err := db.Collect(scanCard)(q.Query(ctx, `SELECT `+cardColumns+` FROM loyalty_cards`+where+cond+
		` ORDER BY `+orderBy+` LIMIT `+limit+lq.OffsetSQL(), args...))
	return cs, total, err
}

// CountCards counts a campaign's cards.
func CountCards(ctx context.Context, q db.Querier, projectID, campaignID string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2`, projectID, campaignID).Scan(&n)
	return n, err
}

// CountCardsWithin counts a campaign's cards made within p.
func CountCardsWithin(ctx context.Context, q db.Querier, projectID, campaignID string, p campaigns.Period) (int64, error) {
	return p.Count(ctx, q, `SELECT count(*) FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2`, "created_at", projectID, campaignID)
}

// dropCards deletes up to limit cards of a deleted campaign for good, with
// their ledger, buckets, what earning keeps of them (when e is not nil)
// and their codes, and answers how many it deleted.
func dropCards(ctx context.Context, tx pgx.Tx, projectID, campaignID string, limit int, e Earning) (int64, error) {
	var cardIDs, codes []string
	rows, err := tx.Query(ctx, `SELECT id, code FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2 ORDER BY id LIMIT $3`,
		projectID, campaignID, limit)
	if err != nil {
		return 0, err
	}
	var id, code string
	if _, err := pgx.ForEachRow(rows, []any{&id, &code}, func() error {
		cardIDs, codes = append(cardIDs, id), append(codes, code)
		return nil
	}); err != nil || len(cardIDs) == 0 {
		return 0, err
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM loyalty_transactions WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`, projectID, cardIDs)
	b.Queue(`DELETE FROM loyalty_card_events WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`, projectID, cardIDs)
	b.Queue(`DELETE FROM loyalty_point_buckets WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`, projectID, cardIDs)
	if e != nil {
		e.QueueDropOfCards(b, projectID, cardIDs)
	}
	// The cards' codes are free again.
	vouchercodes.QueueFree(b, projectID, cardIDs, codes)
	b.Queue(`DELETE FROM loyalty_cards WHERE project_id = $1 AND id = ANY($2::TEXT[])`, projectID, cardIDs)
	return int64(len(cardIDs)), tx.SendBatch(ctx, b).Close()
}

// Opening is LedgerSums' key of gift cards' opening entries.
const Opening = "OPENING"

// LedgerSums are a campaign's ledger entries within p (points of a loyalty
// program, credits of a gift campaign): per transaction type, the sum of
// their changes.
func LedgerSums(ctx context.Context, q db.Querier, projectID, campaignID string, p campaigns.Period) (map[string]int64, error) {
	cond, args := p.Cond("created_at", []any{projectID, campaignID})
	// A gift card's opening entry (QueueOpeningEntries) is its own key,
	// Opening, not one of the additions made to it.
	rows, err := q.Query(ctx, `SELECT CASE WHEN id LIKE 'vtx\_open\_%' THEN '`+Opening+`' ELSE type END AS t, COALESCE(sum(delta), 0)
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
