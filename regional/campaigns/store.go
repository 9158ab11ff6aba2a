package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/categories"
)

// The campaigns table holds every campaign type of the interface, told
// apart by campaign_type, and campaign_voucher_counts their vouchers_count.
// Every statement on them is in this file, the fragments other owners'
// statements join a campaign with included (Columns, JoinLive, LiveIDs…).

// columns are a campaign's columns, read with each card too.
const columns = `id, name, campaign_type, attrs, generation_status, created_at, updated_at`

// Columns are a campaign's columns qualified with alias a, in Dests' order:
// for a statement of another owner that reads a row with its campaign (a
// loyalty card's reads).
func Columns(a string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = a + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// Dests are the scan destinations of Columns; the attrs document lands in
// attrs, for the caller to decode.
func Dests[V any](c *Campaign[V], attrs *[]byte) []any {
	return []any{&c.ID, &c.Name, &c.CampaignType, attrs, &c.GenerationStatus, &c.CreatedAt, &c.UpdatedAt}
}

// JoinLive joins the live campaign, as alias k, of the rows of alias owner
// (their project_id and campaign_id).
func JoinLive(k, owner string) string {
	return ` JOIN campaigns ` + k + ` ON ` + k + `.project_id = ` + owner + `.project_id AND ` + k + `.id = ` + owner +
		`.campaign_id AND ` + k + `.deleted_at IS NULL`
}

// LeftJoin joins the campaign, live or not, as alias k, of the rows of
// alias owner, when they have one.
func LeftJoin(k, owner string) string {
	return ` LEFT JOIN campaigns ` + k + ` ON ` + k + `.project_id = ` + owner + `.project_id AND ` + k + `.id = ` + owner + `.campaign_id`
}

// JoinForExport is the LEFT JOIN, as alias, of the campaign, live or not,
// of project $1 that idSQL names: the campaign columns of another object's
// export (a voucher's or redemption's campaign). It names the project
// parameter rather than the owner's project_id, so that each table of a
// large export is read by its own project's index.
func JoinForExport(alias, idSQL string) string {
	return ` LEFT JOIN campaigns ` + alias + ` ON ` + alias + `.project_id = $1 AND ` + alias + `.id = ` + idSQL
}

// LiveIDs are the ids of project $1's live campaigns (a subquery).
const LiveIDs = `(SELECT id FROM campaigns WHERE project_id = $1 AND deleted_at IS NULL)`

// ActiveIDs are the ids of project $1's live and active campaigns (a
// subquery).
const ActiveIDs = `(SELECT id FROM campaigns WHERE project_id = $1 AND deleted_at IS NULL
	AND COALESCE((attrs->>'active')::BOOL, false))`

// LiveIDOf is the id of project $1's live campaign of type typ whose id,
// or else name, is $2 (a subquery, NULL for none). Each arm is a lookup on
// a unique index.
func LiveIDOf(typ string) string {
	return `(SELECT id FROM (
			SELECT id, 0 AS o FROM campaigns WHERE project_id = $1 AND id = $2 AND deleted_at IS NULL AND campaign_type = '` + typ + `'
			UNION ALL SELECT id, 1 FROM campaigns WHERE project_id = $1 AND name = $2 AND deleted_at IS NULL
				AND campaign_type = '` + typ + `') AS m
			ORDER BY o LIMIT 1)`
}

// A campaign's vouchers_count is not a column of its row, which every
// voucher a publication, an import or a single create added would write,
// making each campaign's writers take turns on it (and a locked campaign
// row stop them all). It is counter rows, campaign_voucher_counts: a writer
// adds to one of voucherCountShards shards, dealt in turn (an upsert,
// nextShard), so writers of one campaign meet only when given the same
// shard, and a reader sums the shards, at most voucherCountShards rows of
// one key prefix, in the statement that reads the campaign. The sum is exact: every
// addition commits with the vouchers it counts.
const voucherCountShards = 16

// vouchersCountOf is the sum of the counter rows of the campaign a names,
// a column of the campaign reads that show vouchers_count.
func vouchersCountOf(a string) string {
	return `(SELECT COALESCE(sum(vc.n), 0) FROM campaign_voucher_counts vc WHERE vc.project_id = ` + a + `.project_id AND vc.campaign_id = ` + a + `.id)`
}

// scan reads columns and then vouchersCountOf.
func scan[V any](r pgx.Row) (Campaign[V], error) {
	var c Campaign[V]
	var attrs []byte
	if err := r.Scan(append(Dests(&c, &attrs), &c.VouchersCount)...); err != nil {
		return Campaign[V]{}, err
	}
	return c, json.Unmarshal(attrs, &c.Attrs)
}

// ofTypes is the condition on campaign_type for types ($n the array), or
// none for every type.
func ofTypes(types []string, args []any) (string, []any) {
	if len(types) == 0 {
		return "", args
	}
	args = append(args, types)
	return ` AND campaign_type = ANY($` + strconv.Itoa(len(args)) + `)`, args
}

// Get reads a live campaign of one of types (any when none) by id or,
// failing that, by name; locked when lock is set. db.ErrNotFound when there
// is none.
func Get[V any](ctx context.Context, q db.Querier, projectID, idOrName string, lock bool, types ...string) (Campaign[V], error) {
	if lock {
		return get[V](ctx, q, projectID, idOrName, forUpdate, types)
	}
	return get[V](ctx, q, projectID, idOrName, noLock, types)
}

// rowLock is the locking clause of get: the campaign's row, not its
// category's.
type rowLock string

const (
	noLock    rowLock = ""
	forUpdate rowLock = " FOR UPDATE OF k"
	forShare  rowLock = " FOR SHARE OF k"
)

// GetShared is Get with the campaign's row share-locked: for a writer that
// adds to a live campaign (a voucher, an import's chunk), whom the
// campaign's update or deletion (FOR UPDATE) waits for, but who does not
// wait for another such writer. (On CockroachDB a SERIALIZABLE transaction
// takes no shared lock unless enable_shared_locking_for_serializable is
// set; it needs none: its read orders a concurrent deletion after it, whose
// job then finds the voucher, or fails its refresh if the writer is pushed
// past the deletion.)
func GetShared[V any](ctx context.Context, q db.Querier, projectID, idOrName string, types ...string) (Campaign[V], error) {
	return get[V](ctx, q, projectID, idOrName, forShare, types)
}

func get[V any](ctx context.Context, q db.Querier, projectID, idOrName string, lock rowLock, types []string) (Campaign[V], error) {
	for _, col := range []string{"id", "name"} {
		cond, args := ofTypes(types, []any{projectID, idOrName})
		c, err := scanWithCategory[V](q.QueryRow(ctx, `SELECT `+Columns("k")+`, `+vouchersCountOf("k")+`, `+categories.Columns("cat")+`
			FROM campaigns k`+categories.LeftJoin("cat", "k", "k.attrs->>'category_id'")+`
			WHERE k.project_id = $1 AND k.`+col+` = $2 AND k.deleted_at IS NULL`+cond+string(lock), args...))
		if !errors.Is(err, db.ErrNotFound) {
			return c, err
		}
	}
	return Campaign[V]{}, db.ErrNotFound
}

// scanWithCategory reads columns, vouchersCountOf and then its category's
// columns (categories.Columns, all null for none) into Attrs.Cat.
func scanWithCategory[V any](r pgx.Row) (Campaign[V], error) {
	var c Campaign[V]
	var attrs []byte
	var cat categories.Nullable
	if err := r.Scan(append(append(Dests(&c, &attrs), &c.VouchersCount), cat.Dests()...)...); err != nil {
		return Campaign[V]{}, err
	}
	if err := json.Unmarshal(attrs, &c.Attrs); err != nil {
		return Campaign[V]{}, err
	}
	c.Attrs.Cat = cat.Get()
	return c, nil
}

// readCategories sets the Attrs.Cat of the campaigns cs that name a
// category, in one more read (a list's page).
func readCategories[V any](ctx context.Context, q db.Querier, projectID string, cs []Campaign[V]) error {
	var want []string
	for _, c := range cs {
		if c.Attrs.CategoryID != nil {
			want = append(want, *c.Attrs.CategoryID)
		}
	}
	if len(want) == 0 {
		return nil
	}
	found, err := categories.ByID(ctx, q, projectID, want)
	if err != nil {
		return err
	}
	for i := range cs {
		if id := cs[i].Attrs.CategoryID; id != nil {
			if cat, ok := found[*id]; ok {
				cs[i].Attrs.Cat = &cat
			}
		}
	}
	return nil
}

// insert writes a new campaign, and its vouchers_count (the vouchers it is
// made with, or will be) in a counter row.
func insert[V any](ctx context.Context, q db.Querier, projectID string, c Campaign[V]) error {
	attrs, err := json.Marshal(c.Attrs)
	if err != nil {
		return err
	}
	if _, err = q.Exec(ctx, `INSERT INTO campaigns (project_id, id, name, campaign_type, attrs, generation_status, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		projectID, c.ID, c.Name, c.CampaignType, attrs, c.GenerationStatus, c.CreatedAt); err != nil {
		return err
	}
	return AddVouchersCount(ctx, q, projectID, c.ID, c.VouchersCount)
}

// update writes a campaign's name, attrs, generation status and updated_at
// (its vouchers_count only grows, by AddVouchersCount).
func update[V any](ctx context.Context, q db.Querier, projectID string, c Campaign[V]) error {
	attrs, err := json.Marshal(c.Attrs)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `UPDATE campaigns SET name = $3, attrs = $4, generation_status = $5, updated_at = $6
		WHERE project_id = $1 AND id = $2`, projectID, c.ID, c.Name, attrs, c.GenerationStatus, c.UpdatedAt)
	return err
}

// List reads a page of live campaigns of types (every type when none) in
// id order, which is creation order, and their total.
func List[V any](ctx context.Context, q db.Querier, projectID string, types []string, lq listq.Query) ([]Campaign[V], int, error) {
	return ListWhere[V](ctx, q, projectID, Filter{Types: types}, lq, time.Time{})
}

// Filter narrows a list of campaigns: to types (any when none), to a
// generation status, and by the filters of GET /v1/campaigns (Fields).
type Filter struct {
	Types  []string
	Status string
	Filter filters.Filter
}

// Fields are the campaign properties GET /v1/campaigns filters by.
var Fields = map[string]filters.Field{
	"campaigns":     {Kind: filters.String, Column: "name"},
	"name":          {Kind: filters.String, Column: "name"},
	"id":            {Kind: filters.String, Column: "id"},
	"campaign_type": {Kind: filters.String, Column: "campaign_type"},
	"created_at":    {Kind: filters.DateTime, Column: "created_at"},
	"updated_at":    {Kind: filters.DateTime, Column: "updated_at"},
}

// ListWhere reads a page of live campaigns that f admits, in id (creation)
// order, and their total; now is the time relative dates in the filters
// count from.
func ListWhere[V any](ctx context.Context, q db.Querier, projectID string, f Filter, lq listq.Query, now time.Time) ([]Campaign[V], int, error) {
	where := func(args []any) (string, []any) {
		cond, args := ofTypes(f.Types, args)
		if f.Status != "" {
			args = append(args, f.Status)
			cond += ` AND generation_status = $` + strconv.Itoa(len(args))
		}
		if !f.Filter.Empty() {
			var sql string
			sql, args = f.Filter.SQL(Fields, args, now)
			cond += " AND " + sql
		}
		return ` WHERE project_id = $1 AND deleted_at IS NULL` + cond, args
	}
	cond, args := where([]any{projectID})
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM campaigns`+cond, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	cond, args = where([]any{projectID, lq.Limit + 1})
	// Ids are time-ordered: creation order is id order.
	key := "id"
	if lq.Key == "updated_at" {
		key = "COALESCE(updated_at, created_at)"
	}
	keyset, orderBy, args := lq.Keyset("campaigns", key, args)
	cs, err := db.Collect(scan[V])(q.Query(ctx, `SELECT `+columns+`, `+vouchersCountOf("campaigns")+` FROM campaigns`+cond+keyset+
		` ORDER BY `+orderBy+` LIMIT $2`+lq.OffsetSQL(), args...))
	if err != nil {
		return nil, 0, err
	}
	return cs, total, readCategories(ctx, q, projectID, cs)
}

// AddVouchersCount counts n more vouchers of a campaign, in the caller's
// transaction (the one that makes them): n is added to a counter row
// (nextShard), so that writers of one campaign do not take turns on one
// row. It neither reads nor locks the campaign's row. Under a context of
// DeferVouchersCounts it only keeps n for QueueDeferredCounts.
func AddVouchersCount(ctx context.Context, q db.Querier, projectID, campaignID string, n int64) error {
	if n == 0 {
		return nil
	}
	if d, ok := ctx.Value(deferKey{}).(*deferredCounts); ok {
		d.adds = append(d.adds, deferredCount{projectID, campaignID, n})
		return nil
	}
	b := &pgx.Batch{}
	queueVouchersCount(b, deferredCount{projectID, campaignID, n})
	return q.SendBatch(ctx, b).Close()
}

func queueVouchersCount(b *pgx.Batch, c deferredCount) {
	b.Queue(`INSERT INTO campaign_voucher_counts (project_id, campaign_id, shard, n) VALUES ($1, $2, $3, $4)
		ON CONFLICT (project_id, campaign_id, shard) DO UPDATE SET n = campaign_voucher_counts.n + excluded.n`,
		c.project, c.campaign, nextShard(), c.n)
}

// shardTurn deals this instance's counter additions to the shards in turn
// from a random start: the upsert's row lock is held to the commit, and
// writers of one instance under way at once (fewer than
// voucherCountShards) each hold a shard of their own rather than meeting
// on one drawn at random (16 writers drawing from 16 shards nearly always
// pair two). Instances meet at random, as before.
var shardTurn = func() *atomic.Uint32 {
	var t atomic.Uint32
	t.Store(rand.Uint32())
	return &t
}()

func nextShard() int16 { return int16(shardTurn.Add(1) % voucherCountShards) }

// deferredCount is a counting AddVouchersCount kept for the transaction's
// last batch.
type deferredCount struct {
	project, campaign string
	n                 int64
}

type deferredCounts struct{ adds []deferredCount }

type deferKey struct{}

// DeferVouchersCounts is ctx under which AddVouchersCount keeps what it
// counts rather than writing it, for the caller to queue onto its
// transaction's last batch (QueueDeferredCounts): the counter row's lock
// is then held from that batch to the commit only, not through the rest
// of the transaction (a CAMPAIGN reward's redemption, which publishes a
// voucher it makes and then writes the points' ledger). A context made
// for one transaction attempt: a retried one makes another.
func DeferVouchersCounts(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferKey{}, &deferredCounts{})
}

// QueueDeferredCounts queues onto b the counts kept under ctx
// (DeferVouchersCounts), and forgets them.
func QueueDeferredCounts(ctx context.Context, b *pgx.Batch) {
	d, ok := ctx.Value(deferKey{}).(*deferredCounts)
	if !ok {
		return
	}
	for _, c := range d.adds {
		queueVouchersCount(b, c)
	}
	d.adds = nil
}

// GenerationStatus is where a campaign's voucher generation is.
type GenerationStatus string

const (
	GenerationInProgress GenerationStatus = "IN_PROGRESS"
	GenerationDone       GenerationStatus = "DONE"
)

// SetGenerationStatus records where a campaign's voucher generation is;
// with n > 0, n more vouchers are counted too (AddVouchersCount).
func SetGenerationStatus(ctx context.Context, q db.Querier, projectID, campaignID string, status GenerationStatus, n int64) error {
	if _, err := q.Exec(ctx, `UPDATE campaigns SET generation_status = $3 WHERE project_id = $1 AND id = $2`,
		projectID, campaignID, status); err != nil {
		return err
	}
	return AddVouchersCount(ctx, q, projectID, campaignID, n)
}

// markDeleted takes campaign c out of every read: it is deleted at now, and
// renamed "<name> #deleted:<id>" so that its name is free for a new one.
func markDeleted[V any](ctx context.Context, q db.Querier, projectID string, c Campaign[V], now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE campaigns SET deleted_at = $3, name = $4 WHERE project_id = $1 AND id = $2`,
		projectID, c.ID, now, c.Name+" #deleted:"+c.ID)
	return err
}

// typeOfAny is the type of a campaign by id, deleted or not (a deletion
// job's campaign); db.ErrNotFound when there is none.
func typeOfAny(ctx context.Context, q db.Querier, projectID, id string) (string, error) {
	var typ string
	err := q.QueryRow(ctx, `SELECT campaign_type FROM campaigns WHERE project_id = $1 AND id = $2`, projectID, id).Scan(&typ)
	return typ, err
}

// TypeOf is the type of a live campaign by id or name, and its id;
// db.ErrNotFound when there is none.
func TypeOf(ctx context.Context, q db.Querier, projectID, idOrName string) (id, typ string, err error) {
	c, err := Get[json.RawMessage](ctx, q, projectID, idOrName, false)
	return c.ID, c.CampaignType, err
}

// WindowsByID reads live campaigns' windows by id, in one query that takes
// from each attrs document only the fields it needs.
func WindowsByID(ctx context.Context, q db.Querier, projectID string, ids []string) (map[string]Window, error) {
	out := map[string]Window{}
	if len(ids) == 0 {
		return out, nil
	}
	b := &pgx.Batch{}
	QueueWindows(b, projectID, ids, out)
	return out, q.SendBatch(ctx, b).Close()
}

// QueueWindows queues WindowsByID's read into b, its answers into out.
func QueueWindows(b *pgx.Batch, projectID string, ids []string, out map[string]Window) {
	b.Queue(`SELECT id, name, campaign_type, COALESCE(attrs->>'category_id', ''), COALESCE((attrs->>'active')::BOOL, false),
			(attrs->>'start_date')::TIMESTAMPTZ, (attrs->>'expiration_date')::TIMESTAMPTZ,
			attrs->'validity_timeframe', attrs->'validity_day_of_week', attrs->'validity_hours'
		FROM campaigns WHERE project_id = $1 AND id = ANY($2::TEXT[]) AND deleted_at IS NULL`, projectID, ids).Query(func(rows pgx.Rows) error {
		var w Window
		var tf, dow, hours []byte
		_, err := pgx.ForEachRow(rows, []any{&w.ID, &w.Name, &w.CampaignType, &w.CategoryID, &w.Active, &w.StartDate, &w.ExpirationDate, &tf, &dow, &hours},
			func() error {
				w.ValidityTimeframe, w.ValidityDayOfWeek, w.ValidityHours = clone(tf), clone(dow), clone(hours)
				out[w.ID] = w
				return nil
			})
		return err
	})
}

func clone(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// FollowCategory keeps the copy campaigns hold of a category
// (categories.Follower): renamed to name, or, deleted (name nil), taken
// out of them.
func FollowCategory(ctx context.Context, q db.Querier, projectID, categoryID string, name *string) error {
	_, err := q.Exec(ctx, `UPDATE campaigns SET attrs = CASE WHEN $3::TEXT IS NULL THEN attrs - 'category' - 'category_id'
		ELSE jsonb_set(attrs, '{category}', to_jsonb($3::TEXT)) END
		WHERE project_id = $1 AND attrs->>'category_id' = $2`, projectID, categoryID, name)
	return err
}

// SetCategory makes a campaign's category the one name or id names
// (categories.Resolve: an unknown id is 404, an unknown name a new
// category): a's category and category_id become its name and id, or
// none. The campaign keeps them as written; FollowCategory keeps them
// when the category is renamed or deleted.
func SetCategory[V any](ctx context.Context, q db.Querier, projectID string, a *Attrs[V], name, id *string, now time.Time) error {
	c, err := categories.Resolve(ctx, q, projectID, name, id, now)
	if err != nil {
		return err
	}
	a.Category, a.CategoryID, a.Cat = nil, nil, c
	if c != nil {
		a.Category, a.CategoryID = &c.Name, &c.ID
	}
	return nil
}

// setChangedCategory is SetCategory for the category a change left in a,
// when it is not the one the campaign had (name, id): a change that does
// not touch the category does not read it.
func setChangedCategory[V any](ctx context.Context, q db.Querier, projectID string, a *Attrs[V], name, id *string, now time.Time) error {
	if same(name, a.Category) && same(id, a.CategoryID) {
		return nil
	}
	return SetCategory(ctx, q, projectID, a, a.Category, a.CategoryID, now)
}

func same(a, b *string) bool { return a == b || a != nil && b != nil && *a == *b }

// Count runs a count query (its own arguments args) restricted to rows
// whose col is within p: a summary's figure, of whichever owner's table.
func (p Period) Count(ctx context.Context, q db.Querier, query, col string, args ...any) (int64, error) {
	cond, args := p.Cond(col, args)
	var n int64
	err := q.QueryRow(ctx, query+cond, args...).Scan(&n)
	return n, err
}
