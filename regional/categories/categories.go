// Package categories serves /v1/categories: a project's categories, each a
// name unique in the project and a hierarchy (lower is processed first).
// Vouchers and campaigns name theirs by category (a name) or category_id,
// resolved here (Resolve) in the writer's transaction.
//
// A voucher keeps its category's id and reads the category through a join
// (Columns, Nullable), so that it reads a renamed category renamed and a
// deleted one as none; what keeps a copy (a campaign's attrs) is told of
// a rename or a deletion in the same transaction (a Follower, given to
// NewService).
package categories

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/categories")

// Category is a row of categories.
type Category struct {
	ID, Name  string
	Hierarchy int64
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// View is the reference's Category.
type View struct {
	ID        string      `json:"id"`
	Name      string      `json:"name"`
	Hierarchy int64       `json:"hierarchy"`
	Object    string      `json:"object"`
	CreatedAt jsonx.Time  `json:"created_at"`
	UpdatedAt *jsonx.Time `json:"updated_at"`
}

// View renders the category.
func (c Category) View() View {
	return View{ID: c.ID, Name: c.Name, Hierarchy: c.Hierarchy, Object: "category",
		CreatedAt: jsonx.Time{Time: c.CreatedAt}, UpdatedAt: jsonx.Ptr(c.UpdatedAt)}
}

// ListView is the answer of GET /v1/categories.
type ListView struct {
	Object  string `json:"object"`
	DataRef string `json:"data_ref"`
	Data    []View `json:"data"`
	Total   int    `json:"total"`
}

// Columns are a category's columns in the table aliased as alias, in the
// order Nullable scans them.
func Columns(alias string) string {
	return strings.ReplaceAll("A.id, A.name, A.hierarchy, A.created_at, A.updated_at", "A.", alias+".")
}

// LeftJoin joins the category, as alias, that idSQL names among those of
// the project of the rows of alias owner (their project_id): read with
// Columns into a Nullable, all null when there is none or it was deleted.
func LeftJoin(alias, owner, idSQL string) string {
	return ` LEFT JOIN categories ` + alias + ` ON ` + alias + `.project_id = ` + owner + `.project_id AND ` + alias + `.id = ` + idSQL
}

// Nullable receives a category read through a LEFT JOIN: all null when
// there is none.
type Nullable struct {
	id, name         *string
	hierarchy        *int64
	created, updated *time.Time
}

// Dests are the scan destinations of Columns.
func (n *Nullable) Dests() []any {
	return []any{&n.id, &n.name, &n.hierarchy, &n.created, &n.updated}
}

// Get is the category read, or nil.
func (n *Nullable) Get() *Category {
	if n.id == nil {
		return nil
	}
	return &Category{ID: *n.id, Name: *n.name, Hierarchy: *n.hierarchy, CreatedAt: *n.created, UpdatedAt: n.updated}
}

func scan(r pgx.Row) (Category, error) {
	var n Nullable
	if err := r.Scan(n.Dests()...); err != nil {
		return Category{}, err
	}
	return *n.Get(), nil
}

// Follower is told, in the writer's transaction, of a category renamed
// (name is its new name) or deleted (name nil).
type Follower func(ctx context.Context, q db.Querier, projectID, id string, name *string) error

// Service holds the rules of categories.
type Service struct {
	pool   *db.Pool
	clock  *clock.Clock
	follow []Follower
}

// NewService returns the category service; a rename or a deletion tells
// each of follow.
func NewService(pool *db.Pool, clk *clock.Clock, follow ...Follower) *Service {
	return &Service{pool: pool, clock: clk, follow: follow}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// Request is the body of POST /v1/categories and PUT /v1/categories/{id}.
type Request struct {
	Name      *string `json:"name"`
	Hierarchy *int64  `json:"hierarchy"`
}

// CheckName refuses a category name that is blank or longer than 200
// characters; path names the property.
func CheckName(path, name string) error {
	if strings.TrimSpace(name) == "" || len(name) > 200 {
		return apierr.InvalidPayload(path + " must be 1 to 200 characters, not only spaces")
	}
	return nil
}

func (r Request) apply(c *Category) error {
	if r.Name != nil {
		if err := CheckName("name", *r.Name); err != nil {
			return err
		}
		c.Name = *r.Name
	}
	if r.Hierarchy != nil {
		if *r.Hierarchy < 0 || *r.Hierarchy > math.MaxInt32 {
			return apierr.InvalidPayload(fmt.Sprintf("hierarchy must be from 0 to %d", math.MaxInt32))
		}
		c.Hierarchy = *r.Hierarchy
	}
	return nil
}

func errDuplicate(name string) error {
	return apierr.Duplicate("category", fmt.Sprintf("A category named %q already exists.", name))
}

// insert writes c unless its name is taken; it answers whether it did.
func insert(ctx context.Context, q db.Querier, projectID string, c Category) (bool, error) {
	tag, err := q.Exec(ctx, `INSERT INTO categories (project_id, id, name, hierarchy, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (project_id, name) DO NOTHING`, projectID, c.ID, c.Name, c.Hierarchy, c.CreatedAt)
	return err == nil && tag.RowsAffected() == 1, err
}

// get reads a category by id (by name with byName); 404 when none.
func get(ctx context.Context, q db.Querier, projectID, key string, byName, lock bool) (Category, error) {
	col := map[bool]string{false: "id", true: "name"}[byName]
	c, err := scan(q.QueryRow(ctx, `SELECT `+Columns("categories")+` FROM categories WHERE project_id = $1 AND `+col+` = $2`+
		db.ForUpdate(lock), projectID, key))
	if errors.Is(err, db.ErrNotFound) {
		return c, apierr.NotFound("category", key)
	}
	return c, err
}

func isNotFound(err error) bool {
	var ae *apierr.Error
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// Create makes a category; a name the project has is 409.
func (s *Service) Create(ctx context.Context, projectID string, r Request) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "categories.Create")
	defer telemetry.End(span, &err)
	if r.Name == nil {
		return View{}, apierr.InvalidPayload("name is required")
	}
	c := Category{ID: ids.New("cat_"), CreatedAt: s.now()}
	if err := r.apply(&c); err != nil {
		return View{}, err
	}
	ok, err := insert(ctx, s.pool, projectID, c)
	if err == nil && !ok {
		err = errDuplicate(c.Name)
	}
	return c.View(), err
}

// Get reads a category by id.
func (s *Service) Get(ctx context.Context, projectID, id string) (View, error) {
	c, err := get(ctx, s.pool, projectID, id, false, false)
	return c.View(), err
}

// List reads the project's categories, by hierarchy, then creation.
func (s *Service) List(ctx context.Context, projectID string) (ListView, error) {
	cs, err := db.Collect(scan)(s.pool.Query(ctx, `SELECT `+Columns("categories")+` FROM categories
		WHERE project_id = $1 ORDER BY hierarchy, id`, projectID))
	out := ListView{Object: "list", DataRef: "data", Data: make([]View, len(cs)), Total: len(cs)}
	for i, c := range cs {
		out.Data[i] = c.View()
	}
	return out, err
}

// Update changes a category's name or hierarchy; a renamed category's
// followers are told.
func (s *Service) Update(ctx context.Context, projectID, id string, r Request) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "categories.Update")
	defer telemetry.End(span, &err)
	var c Category
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if c, err = get(ctx, tx, projectID, id, false, true); err != nil {
			return err
		}
		old := c.Name
		if err := r.apply(&c); err != nil {
			return err
		}
		now := s.now()
		c.UpdatedAt = &now
		_, err = tx.Exec(ctx, `UPDATE categories SET name = $3, hierarchy = $4, updated_at = $5 WHERE project_id = $1 AND id = $2`,
			projectID, c.ID, c.Name, c.Hierarchy, c.UpdatedAt)
		if errors.Is(err, db.ErrConflict) {
			return errDuplicate(c.Name)
		}
		if err != nil || c.Name == old {
			return err
		}
		return s.tell(ctx, tx, projectID, c.ID, &c.Name)
	})
	return c.View(), err
}

// Delete deletes a category. The reference answers 204 whoever uses it:
// its vouchers and campaigns are left without a category.
func (s *Service) Delete(ctx context.Context, projectID, id string) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM categories WHERE project_id = $1 AND id = $2`, projectID, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return apierr.NotFound("category", id)
		}
		return s.tell(ctx, tx, projectID, id, nil)
	})
}

func (s *Service) tell(ctx context.Context, q db.Querier, projectID, id string, name *string) error {
	for _, f := range s.follow {
		if err := f(ctx, q, projectID, id, name); err != nil {
			return err
		}
	}
	return nil
}

// Resolve is the category a write names, in q (its transaction): by id
// (404 when the project has none), or by name, made (hierarchy 0) when
// the project has none of that name; both must name the same category.
// Neither: nil.
func Resolve(ctx context.Context, q db.Querier, projectID string, name, id *string, now time.Time) (*Category, error) {
	switch {
	case id != nil:
		c, err := get(ctx, q, projectID, *id, false, false)
		if err != nil {
			return nil, err
		}
		if name != nil && *name != c.Name {
			return nil, apierr.InvalidPayload(fmt.Sprintf("category %q and category_id %s (%q) name different categories; give one of them",
				*name, *id, c.Name))
		}
		return &c, nil
	case name != nil:
		if err := CheckName("category", *name); err != nil {
			return nil, err
		}
		c, err := get(ctx, q, projectID, *name, true, false)
		if !isNotFound(err) {
			return &c, err
		}
		c = Category{ID: ids.New("cat_"), Name: *name, CreatedAt: now}
		if ok, err := insert(ctx, q, projectID, c); ok || err != nil {
			return &c, err
		}
		// Made meanwhile by a concurrent writer.
		c, err = get(ctx, q, projectID, *name, true, false)
		return &c, err
	}
	return nil, nil
}

// ByID reads the categories of ids that exist, in one query
// (qualifications expanding their redeemables' categories, the engine
// sorting redeemables by their categories' hierarchy).
func ByID(ctx context.Context, q db.Querier, projectID string, ids []string) (map[string]Category, error) {
	out := map[string]Category{}
	if len(ids) == 0 {
		return out, nil
	}
	cs, err := db.Collect(scan)(q.Query(ctx, `SELECT `+Columns("categories")+` FROM categories
		WHERE project_id = $1 AND id = ANY($2::TEXT[])`, projectID, ids))
	for _, c := range cs {
		out[c.ID] = c
	}
	return out, err
}
