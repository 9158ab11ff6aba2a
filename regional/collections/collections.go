// Package collections serves /v1/product-collections: a project's named
// sets of products and SKUs, STATIC (a list) or AUTO_UPDATE (a filter over
// the products' and SKUs' attributes), and tells the validation rules that
// name them which of an order's lines are in them (Mark).
//
// Membership is never materialised: a static collection is its list, kept
// on its row; a dynamic one is its filter, evaluated on the order's lines'
// products (read by id in one query) when a rule names it, so a validation
// costs the same however large the catalogue, and a product changed is in
// or out of a collection at once.
package collections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/internal/targeting"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/products"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/collections")

// Types of collection.
const (
	Static     = "STATIC"
	AutoUpdate = "AUTO_UPDATE"
)

// Limits: the reference's 100 collections a project; a static collection
// lists at most MaxItems products and SKUs (the reference's Dashboard
// stops at 20; its API names no bound).
const (
	MaxPerProject = 100
	MaxItems      = 1000
	maxName       = 200
)

// CacheTTL is how long an instance keeps a collection read: a change made
// on another instance is in force here within it.
const CacheTTL = 2 * time.Second

// Item is one product or SKU a static collection lists.
type Item struct {
	ID        string  `json:"id"`
	Object    string  `json:"object"`
	ProductID *string `json:"product_id,omitempty"`
}

// Collection is a row of product_collections.
type Collection struct {
	ID, Name, Type string
	Filter         json.RawMessage // AUTO_UPDATE
	Items          []Item          // STATIC
	CreatedAt      time.Time
	UpdatedAt      *time.Time
	filter         *productFilter // Filter, compiled
}

// View is the reference's ProductCollectionsItem.
type View struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Type      string          `json:"type"`
	Filter    json.RawMessage `json:"filter,omitempty"`
	Products  []Item          `json:"products,omitempty"`
	CreatedAt jsonx.Time      `json:"created_at"`
	UpdatedAt *jsonx.Time     `json:"updated_at,omitempty"`
	Object    string          `json:"object"`
}

// View renders the collection.
func (c Collection) View() View {
	v := View{ID: c.ID, Name: c.Name, Type: c.Type, CreatedAt: jsonx.Time{Time: c.CreatedAt}, UpdatedAt: jsonx.Ptr(c.UpdatedAt),
		Object: "products_collection"}
	if c.Type == Static {
		v.Products = c.Items
		if v.Products == nil {
			v.Products = []Item{}
		}
	} else {
		v.Filter = c.Filter
	}
	return v
}

// Request is the body of POST /v1/product-collections.
type Request struct {
	Type     *string         `json:"type"`
	Name     *string         `json:"name"`
	Products []Item          `json:"products"`
	Filter   json.RawMessage `json:"filter"`
}

// Service holds the rules of product collections.
type Service struct {
	pool   *db.Pool
	places targeting.Places // the shapes of the locations $in_location names
	clock  *clock.Clock
	cache  *expirable.LRU[string, cached]
}

// cached is a collection read, or none for one that does not exist.
type cached struct{ c *Collection }

// NewService returns the product collection service; places gives the
// shapes of the locations filters name.
func NewService(pool *db.Pool, places targeting.Places, clk *clock.Clock) *Service {
	return &Service{pool: pool, places: places, clock: clk, cache: expirable.NewLRU[string, cached](10_000, nil, CacheTTL)}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

const columns = `id, name, type, filter, products, created_at, updated_at`

func scan(r pgx.Row) (Collection, error) {
	var c Collection
	var items []byte
	if err := r.Scan(&c.ID, &c.Name, &c.Type, &c.Filter, &items, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return c, err
	}
	if len(items) > 0 {
		if err := json.Unmarshal(items, &c.Items); err != nil {
			return c, fmt.Errorf("collections: products of %s: %w", c.ID, err)
		}
	}
	if c.Type == AutoUpdate {
		f, err := parseFilter(c.Filter)
		if err != nil {
			return c, fmt.Errorf("collections: stored filter of %s: %w", c.ID, err)
		}
		c.filter = f
	}
	return c, nil
}

// check reads a create body into a collection, its static items checked
// against the catalogue in q.
func (r Request) check(ctx context.Context, q db.Querier, projectID string, c *Collection) error {
	if r.Name == nil || strings.TrimSpace(*r.Name) == "" || utf8.RuneCountInString(*r.Name) > maxName {
		return apierr.InvalidPayload(fmt.Sprintf("name is required: 1 to %d characters, not only spaces", maxName))
	}
	c.Name = *r.Name
	c.Type = Static
	if r.Type != nil {
		c.Type = *r.Type
	}
	switch c.Type {
	case Static:
		if len(r.Filter) > 0 && string(r.Filter) != "null" {
			return apierr.InvalidPayload("filter is for an AUTO_UPDATE collection; a STATIC one lists its products")
		}
		items, err := checkItems(ctx, q, projectID, r.Products)
		c.Items = items
		return err
	case AutoUpdate:
		if r.Products != nil {
			return apierr.InvalidPayload("products are for a STATIC collection; an AUTO_UPDATE one has a filter")
		}
		if len(r.Filter) == 0 || string(r.Filter) == "null" {
			return apierr.InvalidPayload("filter is required for an AUTO_UPDATE collection")
		}
		f, err := parseFilter(r.Filter)
		if err != nil {
			return err
		}
		c.Filter, c.filter = f.raw, f
		return nil
	}
	return apierr.InvalidPayload(fmt.Sprintf("type must be STATIC or AUTO_UPDATE, got %q", c.Type))
}

// checkItems checks a static collection's list: each a live product or
// SKU of the project, named once; a SKU's product_id, when given, its own
// (filled in when not).
func checkItems(ctx context.Context, q db.Querier, projectID string, items []Item) ([]Item, error) {
	if len(items) > MaxItems {
		return nil, apierr.InvalidPayload(fmt.Sprintf("products: a collection lists at most %d products and SKUs", MaxItems))
	}
	var ps, ss []string
	for i, it := range items {
		at := fmt.Sprintf("products[%d]", i)
		if strings.TrimSpace(it.ID) == "" {
			return nil, apierr.InvalidPayload(at + ".id is required")
		}
		switch it.Object {
		case "product":
			ps = append(ps, it.ID)
		case "sku":
			ss = append(ss, it.ID)
		default:
			return nil, apierr.InvalidPayload(fmt.Sprintf("%s.object must be product or sku, got %q", at, it.Object))
		}
	}
	f, err := products.Lookup(ctx, q, projectID, ps, ss)
	if err != nil {
		return nil, err
	}
	out := make([]Item, len(items))
	seen := map[string]bool{}
	for i, it := range items {
		at := fmt.Sprintf("products[%d]", i)
		if it.Object == "product" {
			p, ok := f.Product(it.ID)
			if !ok || p.ID != it.ID {
				return nil, apierr.NotFound("product", it.ID)
			}
			out[i] = Item{ID: p.ID, Object: "product"}
		} else {
			s, ok := f.SKU(it.ID)
			if !ok || s.ID != it.ID {
				return nil, apierr.NotFound("sku", it.ID)
			}
			if it.ProductID != nil && *it.ProductID != s.ProductID {
				return nil, apierr.InvalidPayload(fmt.Sprintf("%s.product_id: SKU %s is of product %s, not %s", at, s.ID, s.ProductID, *it.ProductID))
			}
			pid := s.ProductID
			out[i] = Item{ID: s.ID, Object: "sku", ProductID: &pid}
		}
		if seen[out[i].ID] {
			return nil, apierr.InvalidPayload(fmt.Sprintf("%s: %s is listed twice", at, out[i].ID))
		}
		seen[out[i].ID] = true
	}
	return out, nil
}

// Create stores a new collection.
func (s *Service) Create(ctx context.Context, projectID string, r Request) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "collections.Create")
	defer telemetry.End(span, &err)
	var v View
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		v, err = s.CreateIn(ctx, tx, projectID, ids.New("pc_"), r)
		return err
	})
	return v, err
}

// CreateIn stores a new collection with the id given in the caller's
// transaction: what a campaign template copied from another project
// carries is made in the transaction of the campaign or tier set up from
// it (regional/templates). A new id is in no cache (a read of an id not
// yet made caches its absence, so it is dropped all the same).
func (s *Service) CreateIn(ctx context.Context, tx pgx.Tx, projectID, id string, r Request) (View, error) {
	c := Collection{ID: id, CreatedAt: s.now()}
	if err := r.check(ctx, tx, projectID, &c); err != nil {
		return View{}, err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM product_collections WHERE project_id = $1`, projectID).Scan(&n); err != nil {
		return View{}, err
	}
	if n >= MaxPerProject {
		return View{}, apierr.New(400, "limit_exceeded", "Limit exceeded", fmt.Sprintf("a project has at most %d product collections", MaxPerProject))
	}
	var items []byte
	if c.Type == Static {
		var err error
		if items, err = json.Marshal(c.Items); err != nil {
			return View{}, err
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO product_collections (project_id, id, name, type, filter, products, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, projectID, c.ID, c.Name, c.Type, nullJSON(c.Filter), items, c.CreatedAt)
	if errors.Is(err, db.ErrConflict) {
		return View{}, apierr.Duplicate("products_collection", fmt.Sprintf("A product collection named %q already exists.", c.Name))
	} else if err != nil {
		return View{}, err
	}
	s.cache.Remove(projectID + "/" + c.ID)
	return c.View(), nil
}

func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return []byte(raw)
}

func get(ctx context.Context, q db.Querier, projectID, id string) (Collection, error) {
	c, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM product_collections WHERE project_id = $1 AND id = $2`, projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return c, apierr.NotFound("products_collection", id)
	}
	return c, err
}

// Get reads a collection.
func (s *Service) Get(ctx context.Context, projectID, id string) (View, error) {
	c, err := get(ctx, s.pool, projectID, id)
	return c.View(), err
}

// Delete removes a collection; a rule naming it matches no line from then.
func (s *Service) Delete(ctx context.Context, projectID, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM product_collections WHERE project_id = $1 AND id = $2`, projectID, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return apierr.NotFound("products_collection", id)
	}
	s.cache.Remove(projectID + "/" + id)
	return nil
}

// List reads a page of the project's collections, whether more follow, and
// how many it has.
func (s *Service) List(ctx context.Context, projectID string, lq listq.Query) ([]View, int, bool, error) {
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM product_collections WHERE project_id = $1`, projectID).Scan(&total); err != nil {
		return nil, 0, false, err
	}
	_, orderBy, args := lq.Keyset("product_collections", orderKeys[lq.Key], []any{projectID, lq.Limit + 1})
	cs, err := db.Collect(scan)(s.pool.Query(ctx, `SELECT `+columns+` FROM product_collections WHERE project_id = $1
		ORDER BY `+orderBy+` LIMIT $2`+lq.OffsetSQL(), args...))
	if err != nil {
		return nil, 0, false, err
	}
	page, more, _ := listq.PageOf(cs, lq.Limit, func(c Collection) string { return c.ID }, Collection.View)
	return page, total, more, nil
}

// Products lists a page of a collection's products and SKUs.
func (s *Service) Products(ctx context.Context, projectID, id string, after time.Time, lq listq.Query) ([]any, int, error) {
	c, err := get(ctx, s.pool, projectID, id)
	if err != nil {
		return nil, 0, err
	}
	if c.Type == Static {
		var ps, ss []string
		for _, it := range c.Items {
			if it.Object == "sku" {
				ss = append(ss, it.ID)
			} else {
				ps = append(ps, it.ID)
			}
		}
		return products.Members(ctx, s.pool, projectID, products.Selection{ProductIDs: ps, SKUIDs: ss}, after, lq.Offset(), lq.Limit)
	}
	f, err := c.filter.bound(ctx, s.places, projectID, c.filter.locations())
	if err != nil {
		return nil, 0, err
	}
	return f.members(ctx, s.pool, projectID, s.clock.Now(), after, lq.Offset(), lq.Limit)
}

// IDByName is the id of the project's collection of that name, or "" when
// it has none: a template copied from another project matches its
// collections by name (the oldest, should several share it).
func (s *Service) IDByName(ctx context.Context, projectID, name string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT id FROM product_collections WHERE project_id = $1 AND name = $2 ORDER BY created_at, id LIMIT 1`,
		projectID, name).Scan(&id)
	if errors.Is(err, db.ErrNotFound) {
		return "", nil
	}
	return id, err
}
