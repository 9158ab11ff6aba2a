package products

import (
	"context"
	"fmt"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/jsonx"
)

// Found are live products and SKUs read by id or source_id, under both.
type Found struct {
	Products map[string]Product
	SKUs     map[string]SKU
}

// Product is the product refs names (its id or source_id), if live.
func (f Found) Product(ref string) (Product, bool) {
	p, ok := f.Products[ref]
	return p, ok && ref != ""
}

// SKU is the SKU ref names (its id or source_id), if live.
func (f Found) SKU(ref string) (SKU, bool) {
	s, ok := f.SKUs[ref]
	return s, ok && ref != ""
}

// Lookup reads the project's live products whose id or source_id is among
// productRefs, and SKUs among skuRefs with their products, in two queries
// along the ids' and the source ids' indexes: what product collections
// need of an order's lines, or of the items a static collection names.
func Lookup(ctx context.Context, q db.Querier, projectID string, productRefs, skuRefs []string) (Found, error) {
	f := Found{Products: map[string]Product{}, SKUs: map[string]SKU{}}
	if len(skuRefs) > 0 {
		skus, err := collectSKUs(q.Query(ctx, `SELECT `+skuColumns+` FROM skus
			WHERE project_id = $1 AND (id = ANY($2::TEXT[]) OR source_id = ANY($2::TEXT[]))`, projectID, skuRefs))
		if err != nil {
			return f, err
		}
		for _, s := range skus {
			f.SKUs[s.ID] = s
			if s.SourceID != nil {
				f.SKUs[*s.SourceID] = s
			}
			productRefs = append(productRefs, s.ProductID)
		}
	}
	if len(productRefs) > 0 {
		ps, err := db.Collect(scanProduct)(q.Query(ctx, `SELECT `+productColumns+` FROM products
			WHERE project_id = $1 AND (id = ANY($2::TEXT[]) OR source_id = ANY($2::TEXT[])) AND bin_id IS NULL`, projectID, productRefs))
		if err != nil {
			return f, err
		}
		for _, p := range ps {
			f.Products[p.ID] = p
			if p.SourceID != nil {
				f.Products[*p.SourceID] = p
			}
		}
	}
	return f, nil
}

// BareView is the reference's ProductWithoutSkus: a product listed among
// a collection's products and SKUs.
type BareView struct {
	ID         string         `json:"id"`
	SourceID   *string        `json:"source_id"`
	Name       *string        `json:"name"`
	Price      *int64         `json:"price"`
	Attributes []string       `json:"attributes"`
	Metadata   map[string]any `json:"metadata"`
	ImageURL   *string        `json:"image_url"`
	CreatedAt  jsonx.Time     `json:"created_at"`
	UpdatedAt  *jsonx.Time    `json:"updated_at"`
	Object     string         `json:"object"`
}

// Bare renders p without its SKUs.
func (p Product) Bare() BareView {
	return BareView{ID: p.ID, SourceID: p.SourceID, Name: p.Name, Price: p.Price, Attributes: orEmptyList(p.Attributes),
		Metadata: orEmpty(p.Metadata), ImageURL: p.ImageURL, CreatedAt: jsonx.Time{Time: p.CreatedAt},
		UpdatedAt: jsonx.Ptr(p.UpdatedAt), Object: "product"}
}

// WithProductView is the reference's SkuWithProduct.
type WithProductView struct {
	SKUView
	Product BareView `json:"product"`
}

// WithProduct renders s with its product.
func (s SKU) WithProduct(p Product) WithProductView {
	return WithProductView{SKUView: s.View(), Product: p.Bare()}
}

func orEmptyList(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// Selection is which products and SKUs Members lists: those of the ids
// given, or those Where holds (an SQL condition over the products table,
// or the skus table with sku, its values given to arg). Keep, when set,
// refines what Where holds in Go: Where is then a prefilter (a product
// collection's $in_location tests bounding boxes in SQL), and Keep is
// given each product (sku nil) or SKU with its product.
type Selection struct {
	ProductIDs, SKUIDs []string
	Where              func(sku bool, arg func(any) string) string
	Keep               func(p Product, sku *SKU) bool
}

type memberKey struct {
	sku bool
	id  string
}

// Members lists a page of the project's live products and SKUs sel holds,
// oldest first, those created after after (zero: all), offset rows on,
// with how many there are. With Keep, every row Where holds is read and
// refined, and the page cut from what is kept.
func Members(ctx context.Context, q db.Querier, projectID string, sel Selection, after time.Time, offset, limit int) ([]any, int, error) {
	args := []any{projectID, after}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var pc, sc string
	if sel.Where != nil {
		pc, sc = sel.Where(false, arg), sel.Where(true, arg)
	} else {
		pc, sc = "id = ANY("+arg(sel.ProductIDs)+"::TEXT[])", "id = ANY("+arg(sel.SKUIDs)+"::TEXT[])"
	}
	from := `SELECT FALSE AS sku, id, created_at FROM products WHERE project_id = $1 AND bin_id IS NULL AND created_at > $2 AND ` + pc + `
		UNION ALL SELECT TRUE, id, created_at FROM skus WHERE project_id = $1 AND created_at > $2 AND ` + sc
	if sel.Keep != nil {
		keys, err := memberKeys(ctx, q, from+` ORDER BY 3, 2`, args)
		if err != nil {
			return nil, 0, err
		}
		out, err := membersOf(ctx, q, projectID, keys, sel.Keep)
		if err != nil {
			return nil, 0, err
		}
		lo, hi := min(offset, len(out)), min(offset+limit, len(out))
		return out[lo:hi], len(out), nil
	}
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM (`+from+`) AS m`, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	n := len(args)
	keys, err := memberKeys(ctx, q, from+fmt.Sprintf(` ORDER BY 3, 2 LIMIT $%d OFFSET $%d`, n+1, n+2), append(args, limit, offset))
	if err != nil {
		return nil, 0, err
	}
	out, err := membersOf(ctx, q, projectID, keys, nil)
	return out, total, err
}

func memberKeys(ctx context.Context, q db.Querier, sql string, args []any) ([]memberKey, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var keys []memberKey
	for rows.Next() {
		var k memberKey
		var at any
		if err := rows.Scan(&k.sku, &k.id, &at); err != nil {
			rows.Close()
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// membersOf reads the products and SKUs of keys and renders them in order,
// those keep holds (all, when nil).
func membersOf(ctx context.Context, q db.Querier, projectID string, keys []memberKey, keep func(Product, *SKU) bool) ([]any, error) {
	var ps, ss []string
	for _, k := range keys {
		if k.sku {
			ss = append(ss, k.id)
		} else {
			ps = append(ps, k.id)
		}
	}
	f, err := Lookup(ctx, q, projectID, ps, ss)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		if k.sku {
			s, ok := f.SKUs[k.id] // else deleted between the two reads
			if ok && (keep == nil || keep(f.Products[s.ProductID], &s)) {
				out = append(out, s.WithProduct(f.Products[s.ProductID]))
			}
		} else if p, ok := f.Products[k.id]; ok && (keep == nil || keep(p, nil)) {
			out = append(out, p.Bare())
		}
	}
	return out, nil
}
