package products

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
)

// Every read here is of live rows unless it says otherwise: products whose
// bin_id IS NULL, and the SKUs in skus (binned ones are in binned_skus).

const productColumns = `id, source_id, name, price, attributes, metadata, image_url, created_at, updated_at`

func scanProduct(r pgx.Row) (Product, error) {
	var p Product
	var attrs, meta []byte
	if err := r.Scan(&p.ID, &p.SourceID, &p.Name, &p.Price, &attrs, &meta, &p.ImageURL, &p.CreatedAt, &p.UpdatedAt); err != nil {
		return Product{}, err
	}
	if err := json.Unmarshal(attrs, &p.Attributes); err != nil {
		return Product{}, fmt.Errorf("products: attributes of %s: %w", p.ID, err)
	}
	if err := json.Unmarshal(meta, &p.Metadata); err != nil {
		return Product{}, fmt.Errorf("products: metadata of %s: %w", p.ID, err)
	}
	return p, nil
}

// getProduct finds a live product by id or, failing that, by source_id.
func getProduct(ctx context.Context, q db.Querier, projectID, ref string, lock bool) (Product, error) {
	p, err := scanProduct(q.QueryRow(ctx, `SELECT `+productColumns+` FROM products
		WHERE project_id = $1 AND id = $2 AND bin_id IS NULL`+db.ForUpdate(lock), projectID, ref))
	if errors.Is(err, db.ErrNotFound) {
		p, err = scanProduct(q.QueryRow(ctx, `SELECT `+productColumns+` FROM products
			WHERE project_id = $1 AND source_id = $2 AND bin_id IS NULL`+db.ForUpdate(lock), projectID, ref))
	}
	return p, err
}

// documents are the product's JSONB columns: attributes (never null) and metadata.
func (p Product) documents() (attrs, meta []byte, err error) {
	a := p.Attributes
	if a == nil {
		a = []string{}
	}
	if attrs, err = json.Marshal(a); err != nil {
		return nil, nil, err
	}
	meta, err = json.Marshal(orEmpty(p.Metadata))
	return attrs, meta, err
}

func insertProduct(ctx context.Context, q db.Querier, projectID string, p Product) error {
	attrs, meta, err := p.documents()
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO products (project_id, id, source_id, name, price, attributes, metadata, image_url, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		projectID, p.ID, p.SourceID, p.Name, p.Price, attrs, meta, p.ImageURL, p.CreatedAt, p.UpdatedAt)
	return err
}

// updateProductSQL sets every property but created_at; queueUpdateProduct
// and updateProduct run it.
const updateProductSQL = `UPDATE products SET source_id = $3, name = $4, price = $5, attributes = $6, metadata = $7,
	image_url = $8, updated_at = $9 WHERE project_id = $1 AND id = $2`

func updateProductArgs(projectID string, p Product) ([]any, error) {
	attrs, meta, err := p.documents()
	return []any{projectID, p.ID, p.SourceID, p.Name, p.Price, attrs, meta, p.ImageURL, p.UpdatedAt}, err
}

func updateProduct(ctx context.Context, q db.Querier, projectID string, p Product) error {
	args, err := updateProductArgs(projectID, p)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, updateProductSQL, args...)
	return err
}

// ListQuery selects and orders a page of products.
type ListQuery = listq.Query

var sortKeys = map[string]string{"created_at": "id", "updated_at": "COALESCE(updated_at, created_at)"}

func listProducts(ctx context.Context, q db.Querier, projectID string, lq ListQuery) ([]Product, int, error) {
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM products WHERE project_id = $1 AND bin_id IS NULL`, projectID).Scan(&total); err != nil {
		return nil, 0, err
	}
	cond, orderBy, args := lq.Keyset("products", sortKeys[lq.Key], []any{projectID, lq.Limit + 1})
	out, err := db.Collect(scanProduct)(q.Query(ctx, `SELECT `+productColumns+` FROM products
		WHERE project_id = $1 AND bin_id IS NULL`+cond+` ORDER BY `+orderBy+` LIMIT $2`+lq.OffsetSQL(), args...))
	return out, total, err
}

const skuColumns = `id, product_id, source_id, sku, price, currency, attributes, metadata, image_url, created_at, updated_at`

func scanSKU(r pgx.Row, extra ...any) (SKU, error) {
	var s SKU
	var attrs, meta []byte
	dst := append([]any{&s.ID, &s.ProductID, &s.SourceID, &s.SKU, &s.Price, &s.Currency, &attrs, &meta, &s.ImageURL,
		&s.CreatedAt, &s.UpdatedAt}, extra...)
	if err := r.Scan(dst...); err != nil {
		return SKU{}, err
	}
	if err := json.Unmarshal(attrs, &s.Attributes); err != nil {
		return SKU{}, fmt.Errorf("products: attributes of %s: %w", s.ID, err)
	}
	if err := json.Unmarshal(meta, &s.Metadata); err != nil {
		return SKU{}, fmt.Errorf("products: metadata of %s: %w", s.ID, err)
	}
	return s, nil
}

// collectSKUs reads a query's SKU rows.
var collectSKUs = db.Collect(func(r pgx.Row) (SKU, error) { return scanSKU(r) })

// getSKU finds a live SKU by id or, failing that, by source_id.
func getSKU(ctx context.Context, q db.Querier, projectID, ref string, lock bool) (SKU, error) {
	s, err := scanSKU(q.QueryRow(ctx, `SELECT `+skuColumns+` FROM skus WHERE project_id = $1 AND id = $2`+
		db.ForUpdate(lock), projectID, ref))
	if errors.Is(err, db.ErrNotFound) {
		s, err = scanSKU(q.QueryRow(ctx, `SELECT `+skuColumns+` FROM skus WHERE project_id = $1 AND source_id = $2`+
			db.ForUpdate(lock), projectID, ref))
	}
	return s, err
}

func skuArgs(projectID string, s SKU) ([]any, error) {
	a, err := json.Marshal(orEmpty(s.Attributes))
	if err != nil {
		return nil, err
	}
	m, err := json.Marshal(orEmpty(s.Metadata))
	if err != nil {
		return nil, err
	}
	return []any{projectID, s.ID, s.ProductID, s.SourceID, s.SKU, s.Price, s.Currency, a, m, s.ImageURL, s.CreatedAt, s.UpdatedAt}, nil
}

func insertSKU(ctx context.Context, q db.Querier, projectID string, s SKU) error {
	args, err := skuArgs(projectID, s)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, insertSKUSQL, args...)
	return err
}

const insertSKUSQL = `INSERT INTO skus (project_id, id, product_id, source_id, sku, price, currency, attributes, metadata,
	image_url, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

func updateSKU(ctx context.Context, q db.Querier, projectID string, s SKU) error {
	args, err := skuArgs(projectID, s)
	if err != nil {
		return err
	}
	args = append(args[:10], s.UpdatedAt) // all but created_at
	_, err = q.Exec(ctx, `UPDATE skus SET source_id = $4, sku = $5, price = $6, currency = $7, attributes = $8, metadata = $9,
		image_url = $10, updated_at = $11 WHERE project_id = $1 AND id = $2 AND product_id = $3`, args...)
	return err
}

// binSKUs moves SKUs, those of a product or one of them (where, after
// project_id = $1), into binned_skus under bin entry $3, and, with
// returning, reads them back.
func binSKUs(ctx context.Context, tx pgx.Tx, where string, returning bool, args ...any) ([]SKU, error) {
	ret := ""
	if returning {
		ret = " RETURNING " + skuColumns
	}
	return collectSKUs(tx.Query(ctx, `WITH moved AS (DELETE FROM skus WHERE project_id = $1 AND `+where+`
			RETURNING project_id, `+skuColumns+`)
		INSERT INTO binned_skus (project_id, `+skuColumns+`, bin_id) SELECT project_id, `+skuColumns+`, $3::TEXT FROM moved`+ret, args...))
}

// lockLiveProducts returns, locked, the live products whose column col
// (id or source_id) is one of vals.
//
// Like every lookup of a chunk's thousands of values, it is planned for its
// own arguments each time (pgx.QueryExecModeExec): PostgreSQL's generic plan,
// which a cached statement gets from its sixth run, was made from statistics
// taken before an import grew the table and checked every value against
// every row, so that a chunk took 24 s instead of 20 ms.
func lockLiveProducts(ctx context.Context, q db.Querier, projectID, col string, vals []string) ([]Product, error) {
	return db.Collect(scanProduct)(q.Query(ctx, `SELECT `+prefixed("p", productColumns)+` FROM unnest($2::TEXT[]) AS v(val)
		JOIN products AS p ON p.project_id = $1 AND p.`+col+` = v.val AND p.bin_id IS NULL FOR UPDATE OF p`,
		pgx.QueryExecModeExec, projectID, vals))
}

// lockLiveSKUs is lockLiveProducts for SKUs by source_id.
func lockLiveSKUs(ctx context.Context, q db.Querier, projectID string, srcs []string) ([]SKU, error) {
	return collectSKUs(q.Query(ctx, `SELECT `+prefixed("k", skuColumns)+` FROM unnest($2::TEXT[]) AS v(val)
		JOIN skus AS k ON k.project_id = $1 AND k.source_id = v.val FOR UPDATE OF k`,
		pgx.QueryExecModeExec, projectID, srcs))
}

func prefixed(alias, columns string) string {
	cols := strings.Split(columns, ", ")
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}

// embeddedSKUs returns the first n live SKUs of each product, by id, and
// how many each has.
func embeddedSKUs(ctx context.Context, q db.Querier, projectID string, productIDs []string, n int) (map[string][]SKU, map[string]int, error) {
	rows, err := q.Query(ctx, `SELECT `+skuColumns+`, total FROM (
			SELECT `+skuColumns+`, row_number() OVER (PARTITION BY product_id ORDER BY id) AS n,
				count(*) OVER (PARTITION BY product_id) AS total
			FROM skus WHERE project_id = $1 AND product_id = ANY($2::TEXT[])) AS s
		WHERE n <= $3 ORDER BY product_id, id`, projectID, productIDs, n)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	skus, totals := map[string][]SKU{}, map[string]int{}
	for rows.Next() {
		var total int
		s, err := scanSKU(rows, &total)
		if err != nil {
			return nil, nil, err
		}
		skus[s.ProductID] = append(skus[s.ProductID], s)
		totals[s.ProductID] = total
	}
	return skus, totals, rows.Err()
}

// listSKUs returns a page (limit+1 rows) of a product's live SKUs by id and
// how many it has.
func listSKUs(ctx context.Context, q db.Querier, projectID, productID string, lq listq.Query) ([]SKU, int, error) {
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM skus WHERE project_id = $1 AND product_id = $2`,
		projectID, productID).Scan(&total); err != nil {
		return nil, 0, err
	}
	cond, orderBy, args := lq.Keyset("skus", sortKeys[lq.Key], []any{projectID, productID, lq.Limit + 1})
	out, err := collectSKUs(q.Query(ctx, `SELECT `+skuColumns+` FROM skus
		WHERE project_id = $1 AND product_id = $2`+cond+` ORDER BY `+orderBy+` LIMIT $3`+lq.OffsetSQL(), args...))
	return out, total, err
}

// PriceIn is the catalogue price of a product (or, with sku, a SKU) by id
// or source id, read through q (the caller's transaction); nil when it has
// none or does not exist.
func PriceIn(ctx context.Context, q db.Querier, projectID, ref string, sku bool) (*int64, error) {
	if sku {
		s, err := getSKU(ctx, q, projectID, ref, false)
		if errors.Is(err, db.ErrNotFound) {
			return nil, nil
		}
		return s.Price, err
	}
	p, err := getProduct(ctx, q, projectID, ref, false)
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil
	}
	return p.Price, err
}
