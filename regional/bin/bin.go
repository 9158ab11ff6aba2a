// Package bin is the bin (trash bin) of a project: what was deleted without
// force waits there, out of every list and read, until it is removed for
// good by DELETE /v1/trash-bin/{binEntryId} or by the retention sweep.
//
// The bin owns its entries; the resources stay in their own tables, marked
// as binned. Moving a resource to the bin is the owner's write, with Put in
// the owner's transaction; removing it for good is the owner's Remover,
// which the bin calls. The owners and the bin need each other, so the
// piece the owners need, Put, is a function of the package and needs no
// Bin: the owners are built first, and New takes their Removers.
package bin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/internal/telemetry"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/bin")

// DefaultRetention is how long an entry stays in the bin unless configured.
const DefaultRetention = 30 * 24 * time.Hour

// Entry is a resource in the bin.
type Entry struct {
	ID           string
	ResourceType string // product, sku (campaign and voucher in the reference)
	ResourceID   string
	ResourceName *string
	ParentID     *string // a SKU's product
	CreatedAt    time.Time
}

// NewID makes a bin entry id.
func NewID() string { return ids.New("bin_") }

// Remover deletes an entry's resource for good, in tx. It may delete other
// entries too (a product's removal takes its SKUs' entries).
type Remover func(ctx context.Context, tx pgx.Tx, projectID string, e Entry) error

// Removers are the Remover of each resource type the bin holds.
type Removers map[string]Remover

// Bin lists, removes and expires a cluster's bin entries.
type Bin struct {
	pool      *db.Pool
	clock     *clock.Clock
	retention time.Duration
	removers  Removers
}

// New returns the bin, which removes entries for good through removers;
// entries older than retention (0: DefaultRetention) by clk are removed by
// Run.
func New(pool *db.Pool, clk *clock.Clock, retention time.Duration, removers Removers) *Bin {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &Bin{pool: pool, clock: clk, retention: retention, removers: removers}
}

// Put queues the entries' rows on batch, which the caller sends in the
// transaction that marks their resources binned. Entries are written in
// one statement however many there are.
func Put(batch *pgx.Batch, projectID string, entries []Entry) {
	if len(entries) == 0 {
		return
	}
	n := len(entries)
	id, typ, rid := make([]string, n), make([]string, n), make([]string, n)
	name, parent := make([]*string, n), make([]*string, n)
	at := make([]time.Time, n)
	for i, e := range entries {
		id[i], typ[i], rid[i], name[i], parent[i], at[i] = e.ID, e.ResourceType, e.ResourceID, e.ResourceName, e.ParentID, e.CreatedAt
	}
	batch.Queue(`INSERT INTO bin_entries (project_id, id, resource_type, resource_id, resource_name, resource_parent_id, created_at)
		SELECT $1, v.id, v.typ, v.rid, v.name, v.parent, v.at
		FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TIMESTAMPTZ[]) AS v(id, typ, rid, name, parent, at)`,
		projectID, id, typ, rid, name, parent, at)
}

const columns = `id, resource_type, resource_id, resource_name, resource_parent_id, created_at`

// QueueDropChildren queues onto batch the deletion of the entries of a
// parent's binned children of a type (a product's SKUs), when the parent
// goes for good: the bin owns its table, and the caller's batch keeps it one
// round trip.
func QueueDropChildren(batch *pgx.Batch, projectID, resourceType, parentID string) {
	batch.Queue(`DELETE FROM bin_entries WHERE project_id = $1 AND resource_parent_id = $2 AND resource_type = $3`,
		projectID, parentID, resourceType)
}

func scan(r pgx.Row) (Entry, error) {
	var e Entry
	return e, r.Scan(&e.ID, &e.ResourceType, &e.ResourceID, &e.ResourceName, &e.ParentID, &e.CreatedAt)
}

// Remove deletes an entry and its resource for good.
func (b *Bin) Remove(ctx context.Context, projectID, entryID string) (err error) {
	ctx, span := tracer.Start(ctx, "bin.Remove")
	defer telemetry.End(span, &err)
	return db.InTx(ctx, b.pool, func(tx pgx.Tx) error { return b.remove(ctx, tx, projectID, entryID) })
}

func (b *Bin) remove(ctx context.Context, tx pgx.Tx, projectID, entryID string) error {
	e, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM bin_entries WHERE project_id = $1 AND id = $2 FOR UPDATE`,
		projectID, entryID))
	if errors.Is(err, db.ErrNotFound) {
		return apierr.NotFound("bin_entry", entryID)
	}
	if err != nil {
		return err
	}
	rm, ok := b.removers[e.ResourceType]
	if !ok {
		return fmt.Errorf("bin: no remover for %s entries", e.ResourceType)
	}
	if err := rm(ctx, tx, projectID, e); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `DELETE FROM bin_entries WHERE project_id = $1 AND id = $2`, projectID, e.ID)
	return err
}

// Expire removes for good every entry older than the retention period,
// products before SKUs of the same moment (a product's removal may take
// the entries of SKUs binned on their own).
func (b *Bin) Expire(ctx context.Context) (err error) {
	ctx, span := tracer.Start(ctx, "bin.Expire")
	defer telemetry.End(span, &err)
	cutoff := b.clock.Now().Add(-b.retention)
	return db.EachBatch(ctx, func(ctx context.Context) (bool, error) {
		rows, err := b.pool.Query(ctx, `SELECT project_id, id FROM bin_entries WHERE created_at <= $1
			ORDER BY created_at, resource_type = 'sku' LIMIT 100`, cutoff)
		if err != nil {
			return false, err
		}
		type due struct{ project, id string }
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (due, error) {
			var d due
			return d, r.Scan(&d.project, &d.id)
		})
		if err != nil || len(batch) == 0 {
			return true, err
		}
		for _, d := range batch {
			err := db.InTx(ctx, b.pool, func(tx pgx.Tx) error { return b.remove(ctx, tx, d.project, d.id) })
			var nf *apierr.Error
			if errors.As(err, &nf) {
				continue // removed meanwhile, or with its product earlier in this batch
			}
			if err != nil {
				return false, err
			}
		}
		return false, nil
	})
}

// Run expires entries every interval until ctx ends.
func (b *Bin) Run(ctx context.Context, interval time.Duration, log func(error)) {
	b.clock.Every(ctx, interval, log, b.Expire)
}

// View is the reference's TrashBinItem.
type View struct {
	ID               string     `json:"id"`
	CreatedAt        jsonx.Time `json:"created_at"`
	DeletedByUserID  *string    `json:"deleted_by_user_id"`
	ResourceID       string     `json:"resource_id"`
	ResourceType     string     `json:"resource_type"`
	ResourceName     *string    `json:"resource_name"`
	ResourceParentID *string    `json:"resource_parent_id"`
	Object           string     `json:"object"`
}

// View renders e.
func (e Entry) View() View {
	return View{ID: e.ID, CreatedAt: jsonx.Time{Time: e.CreatedAt}, ResourceID: e.ResourceID, ResourceType: e.ResourceType,
		ResourceName: e.ResourceName, ResourceParentID: e.ParentID, Object: e.ResourceType}
}

var listFields = map[string]filters.Field{
	"id":            {Kind: filters.String, Column: "id"},
	"resource_type": {Kind: filters.String, Column: "resource_type"},
	"resource_name": {Kind: filters.String, Column: "resource_name"},
	"resource_id":   {Kind: filters.String, Column: "resource_id"},
}

// ListQuery selects a page of entries.
type ListQuery struct {
	listq.Query
	Filter filters.Filter
}

// List returns a page of entries (limit+1 rows, for listq.Page) and how
// many match the filter.
func (b *Bin) List(ctx context.Context, projectID string, lq ListQuery) (out []Entry, total int, err error) {
	err = db.InTx(ctx, b.pool, func(tx pgx.Tx) error {
		cond, args := lq.Filter.SQL(listFields, []any{projectID}, b.clock.Now())
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM bin_entries WHERE project_id = $1 AND `+cond, args...).Scan(&total); err != nil {
			return err
		}
		after, orderBy, args := lq.Keyset("bin_entries", "id", args)
		args = append(args, lq.Limit+1)
		out, err = db.Collect(scan)(tx.Query(ctx, `SELECT `+columns+` FROM bin_entries WHERE project_id = $1 AND `+cond+after+
			fmt.Sprintf(" ORDER BY %s LIMIT $%d", orderBy, len(args)), args...))
		return err
	})
	return out, total, err
}

// Register mounts the bin's endpoints on g (the /v1 group).
func Register(g *echo.Group, b *Bin) {
	g.GET("/trash-bin", func(c echo.Context) error {
		lq, err := parseList(c.QueryParams())
		if err != nil {
			return err
		}
		rows, total, err := b.List(c.Request().Context(), httpx.ProjectID(c), lq)
		if err != nil {
			return err
		}
		page, more, next := listq.PageOf(rows, lq.Limit, func(e Entry) string { return e.ID }, Entry.View)
		return c.JSON(200, listq.List[View]{Data: page, Total: &total, More: more, Next: next})
	})
	g.DELETE("/trash-bin/:binEntryId", func(c echo.Context) error {
		if err := b.Remove(c.Request().Context(), httpx.ProjectID(c), c.Param("binEntryId")); err != nil {
			return err
		}
		return c.NoContent(204)
	})
}

func parseList(q url.Values) (ListQuery, error) {
	var lq ListQuery
	var err error
	if lq.Query, err = listq.Parse(q, listq.Spec{}); err != nil {
		return lq, err
	}
	lq.Filter, err = filters.Parse(q, listFields)
	return lq, err
}
