package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/pglocal"
)

type productsResult struct {
	imported, importFailed int
	importSecs, copySecs   float64
	importJobSecs          float64 // the job's own processing_time
	importUpload           float64 // until the upload was answered
	importStarted          float64 // until the action was first seen IN_PROGRESS (0: never seen so)
	skus                   int
	samples                int
	bin, force             []float64 // ms through the router, sorted
	refBin, refForce       []float64 // ms of the same rows written by plain SQL, sorted
}

// upload posts a CSV file as the `file` form field and returns the async action id.
func (c client) upload(path string, csv []byte) (string, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	f, _ := w.CreateFormFile("file", "bench.csv")
	f.Write(csv)
	w.Close()
	res, err := c.send("POST", path, &body, w.FormDataContentType())
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || (res.StatusCode != 200 && res.StatusCode != 202) {
		return "", fmt.Errorf("upload %s: %d %v %v", path, res.StatusCode, m, err)
	}
	return m["async_action_id"].(string), nil
}

// await polls an async action every 20 ms until it is DONE.
func (c client) await(id string, limit time.Duration) (map[string]any, error) {
	return c.awaitSeen(id, limit, nil)
}

// awaitSeen is await telling seen each status the action is first found in.
// awaitAll waits for every async action of ids in turn and sums their
// results' done and failed counts (an import split over several requests).
func (c client) awaitAll(ids []string) (done, failed int, err error) {
	for _, id := range ids {
		act, err := c.await(id, 10*time.Minute)
		if err != nil {
			return done, failed, err
		}
		res := act["result"].(map[string]any)
		done += int(res["done_count"].(float64))
		failed += int(res["failed_count"].(float64))
	}
	return done, failed, nil
}

// copyTimed COPYs n rows made by row (given the row's index and one time
// for all) into table's cols, the reference an import is measured beside,
// and answers how long making and copying them took.
func copyTimed(ctx context.Context, pool *pgxpool.Pool, table string, cols []string, n int, row func(i int, now time.Time) []any) (float64, error) {
	start := time.Now()
	rows := make([][]any, n)
	now := time.Now()
	for i := range rows {
		rows[i] = row(i, now)
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
	return time.Since(start).Seconds(), err
}

func (c client) awaitSeen(id string, limit time.Duration, seen func(status string)) (map[string]any, error) {
	start := time.Now()
	last := ""
	for {
		act, err := c.must("GET", "/v1/async-actions/"+id, nil)
		if err != nil {
			return nil, err
		}
		if st, _ := act["status"].(string); st != last && seen != nil {
			last = st
			seen(st)
		}
		if act["status"] == "DONE" {
			return act, nil
		}
		if act["status"] == "FAILED" || time.Since(start) > limit {
			return nil, fmt.Errorf("async action: %v", act)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func benchProducts(stack *devstack.Stack, p devstack.ProjectCredentials, srv *pglocal.Server) (productsResult, error) {
	var r productsResult
	ctx := context.Background()
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	pool, err := pgxpool.New(ctx, srv.URL("tally"))
	if err != nil {
		return r, err
	}
	defer pool.Close()
	if err := productsImport(ctx, &r, c, pool); err != nil {
		return r, err
	}
	// Then products of 1,000 SKUs each, made by a bulk update and a SKU
	// import, deleted one at a time to the bin and with force; the
	// reference writes the same rows with plain SQL in one transaction.
	if err := productsWithSKUs(ctx, &r, c, pool); err != nil {
		return r, err
	}
	return r, productsDelete(ctx, &r, c, pool)
}

// The products deleted: 2 × deleteSamples of skusPerProduct SKUs each,
// the reference's in project refProject.
const (
	skusPerProduct, deleteSamples = 1000, 21
	refProject                    = "proj_bench_ref"
)

// productsImport times 100,000 products from one CSV file, until the
// async action is done; the reference is COPY of the same rows into the
// same table.
func productsImport(ctx context.Context, r *productsResult, c client, pool *pgxpool.Pool) error {
	const n = 100000
	var csv bytes.Buffer
	csv.WriteString("name,source_id,price,attributes,color\n")
	for i := range n {
		fmt.Fprintf(&csv, "Product %06d,imp-%06d,%d,\"size,color\",red\n", i, i, 100+i%5000)
	}
	fmt.Fprintf(os.Stderr, "bench: importing %d products from a %.1f MB CSV file\n", n, float64(csv.Len())/1e6)
	start := time.Now()
	id, err := c.upload("/v1/products/importCSV", csv.Bytes())
	if err != nil {
		return err
	}
	r.importUpload = time.Since(start).Seconds()
	act, err := c.awaitSeen(id, 5*time.Minute, func(status string) {
		if status == "IN_PROGRESS" {
			r.importStarted = time.Since(start).Seconds()
		}
	})
	if err != nil {
		return err
	}
	r.importSecs = time.Since(start).Seconds()
	r.importJobSecs = act["processing_time"].(float64) / 1000
	fmt.Fprintf(os.Stderr, "bench: import answered after %.2f s, seen in progress after %.2f s, seen done after %.2f s; the job ran %.2f s\n",
		r.importUpload, r.importStarted, r.importSecs, r.importJobSecs)
	res := act["result"].(map[string]any)
	r.imported, r.importFailed = int(res["done_count"].(float64)), int(res["failed_count"].(float64))

	r.copySecs, err = copyTimed(ctx, pool, "products", []string{"project_id", "id", "source_id", "name", "price", "attributes", "metadata",
		"created_at"}, n, func(i int, now time.Time) []any {
		return []any{"proj_bench_copy", fmt.Sprintf("prod_copy%06d", i), fmt.Sprintf("imp-%06d", i), fmt.Sprintf("Product %06d", i),
			int64(100 + i%5000), `["size","color"]`, `{"color":"red"}`, now}
	})
	return err
}

// productsWithSKUs makes the products to delete, through the API and for
// the reference.
func productsWithSKUs(ctx context.Context, r *productsResult, c client, pool *pgxpool.Pool) error {
	r.skus, r.samples = skusPerProduct, deleteSamples
	var items []map[string]any
	var skus bytes.Buffer
	skus.WriteString("product_id,sku,source_id,price\n")
	for i := range 2 * deleteSamples {
		items = append(items, map[string]any{"source_id": fmt.Sprintf("del-%d", i), "name": fmt.Sprintf("Delete me %d", i)})
		for j := range skusPerProduct {
			fmt.Fprintf(&skus, "del-%d,Variant %d,del-%d-%d,%d\n", i, j, i, j, 100+j)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %d products with %d SKUs each\n", 2*deleteSamples, skusPerProduct)
	status, m, err := c.do("POST", "/v1/products/bulk/async", items)
	if err != nil || status != 202 {
		return fmt.Errorf("bulk: %d %v %v", status, m, err)
	}
	if _, err := c.await(m["async_action_id"].(string), time.Minute); err != nil {
		return err
	}
	id, err := c.upload("/v1/skus/importCSV", skus.Bytes())
	if err != nil {
		return err
	}
	act, err := c.await(id, 5*time.Minute)
	if err != nil {
		return err
	}
	if done := act["result"].(map[string]any)["done_count"].(float64); int(done) != 2*deleteSamples*skusPerProduct {
		return fmt.Errorf("sku import: %v", act["result"])
	}
	if _, err := pool.Exec(ctx, `INSERT INTO products (project_id, id, source_id, name, created_at)
		SELECT $1, 'prod_ref' || i::TEXT, 'del-' || i::TEXT, 'Delete me', now() FROM generate_series(0, $2 - 1) AS i`, refProject, 2*deleteSamples); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `INSERT INTO skus (project_id, id, product_id, source_id, sku, price, created_at)
		SELECT $1, 'sku_ref' || i::TEXT || '_' || j::TEXT, 'prod_ref' || i::TEXT, 'del-' || i::TEXT || '-' || j::TEXT, 'Variant', 100, now()
		FROM generate_series(0, $2 - 1) AS i, generate_series(0, $3 - 1) AS j`, refProject, 2*deleteSamples, skusPerProduct); err != nil {
		return err
	}
	return nil
}

// productsDelete times the deletions, one at a time, every other one with
// force, each beside the reference's.
func productsDelete(ctx context.Context, r *productsResult, c client, pool *pgxpool.Pool) error {
	timed := func(fn func() error) (float64, error) {
		t := time.Now()
		err := fn()
		return float64(time.Since(t).Microseconds()) / 1000, err
	}
	for i := range 2 * deleteSamples {
		force := i%2 == 1
		path := fmt.Sprintf("/v1/products/del-%d", i)
		if force {
			path += "?force=true"
		}
		ms, err := timed(func() error {
			res, err := c.send("DELETE", path, nil, "")
			if err != nil {
				return err
			}
			res.Body.Close()
			if res.StatusCode != 204 {
				return fmt.Errorf("DELETE %s: %d", path, res.StatusCode)
			}
			return nil
		})
		if err != nil {
			return err
		}
		refMS, err := timed(func() error { return refDelete(ctx, pool, refProject, fmt.Sprintf("prod_ref%d", i), force) })
		if err != nil {
			return err
		}
		if force {
			r.force, r.refForce = append(r.force, ms), append(r.refForce, refMS)
		} else {
			r.bin, r.refBin = append(r.bin, ms), append(r.refBin, refMS)
		}
	}
	for _, xs := range [][]float64{r.bin, r.force, r.refBin, r.refForce} {
		sort.Float64s(xs)
	}
	return nil
}

// refDelete writes what deleting a product with its SKUs writes, as set-based
// SQL in one SERIALIZABLE transaction (as Tally's): the floor the API's
// figure is read against. To the bin: the product marked, its SKUs moved to
// binned_skus, one entry; for good: the SKUs, live and binned, their
// entries and the product deleted.
func refDelete(ctx context.Context, pool *pgxpool.Pool, project, productID string, force bool) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		if force {
			b.Queue(`DELETE FROM skus WHERE project_id = $1 AND product_id = $2`, project, productID)
			b.Queue(`DELETE FROM binned_skus WHERE project_id = $1 AND product_id = $2`, project, productID)
			b.Queue(`DELETE FROM bin_entries WHERE project_id = $1 AND resource_parent_id = $2 AND resource_type = 'sku'`, project, productID)
			b.Queue(`DELETE FROM products WHERE project_id = $1 AND id = $2`, project, productID)
		} else {
			b.Queue(`UPDATE products SET bin_id = 'bin_' || id WHERE project_id = $1 AND id = $2`, project, productID)
			b.Queue(`WITH moved AS (DELETE FROM skus WHERE project_id = $1 AND product_id = $2 RETURNING *)
				INSERT INTO binned_skus (project_id, id, product_id, source_id, sku, price, currency, attributes, metadata, image_url,
					created_at, updated_at, bin_id)
				SELECT project_id, id, product_id, source_id, sku, price, currency, attributes, metadata, image_url,
					created_at, updated_at, 'bin_' || product_id FROM moved`, project, productID)
			b.Queue(`INSERT INTO bin_entries (project_id, id, resource_type, resource_id, resource_name, created_at)
				SELECT project_id, bin_id, 'product', id, name, now() FROM products WHERE project_id = $1 AND id = $2`,
				project, productID)
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

func productsReport(r productsResult) string {
	var b strings.Builder
	p50 := func(xs []float64) float64 { return quantile(xs, 0.5) }
	fmt.Fprintf(&b, "## Products: deletion and import\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, every request through the router with tracing on.\n\n",
		time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "- **Deletion.** %d products of %d SKUs each (made by `POST /v1/products/bulk/async` and `POST /v1/skus/importCSV`) "+
		"are deleted one at a time, alternately to the bin (`DELETE /v1/products/{id}`) and for good (`?force=true`). "+
		"The reference writes those rows as set-based SQL in one serializable transaction straight to PostgreSQL, on products "+
		"made alike, right after each request.\n", 2*r.samples, r.skus)
	fmt.Fprintf(&b, "- **Import.** One CSV file of %d products (name, source_id, price, attributes, one metadata column) is posted "+
		"to `POST /v1/products/importCSV`. The clock runs from the request until a poll every 20 ms finds the async action DONE. "+
		"The reference is COPY of the same rows into the same table.\n\n", r.imported+r.importFailed)
	fmt.Fprintf(&b, "| measure | Tally | reference |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| delete a product with %d SKUs to the bin, p50 / max of %d | %.1f / %.1f ms | %.1f / %.1f ms |\n", r.skus, len(r.bin),
		p50(r.bin), r.bin[len(r.bin)-1], p50(r.refBin), r.refBin[len(r.refBin)-1])
	fmt.Fprintf(&b, "| delete a product with %d SKUs for good, p50 / max of %d | %.1f / %.1f ms | %.1f / %.1f ms |\n", r.skus, len(r.force),
		p50(r.force), r.force[len(r.force)-1], p50(r.refForce), r.refForce[len(r.refForce)-1])
	fmt.Fprintf(&b, "| import %d products (%d failed rows) until done (of which the job ran) | %.2f s (%.2f s) | %.2f s |\n",
		r.imported, r.importFailed, r.importSecs, r.importJobSecs, r.copySecs)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| delete a product with %d SKUs, to the bin / for good, p50 | ≤ 50 ms | %.1f / %.1f ms | %s |\n", r.skus,
		p50(r.bin), p50(r.force), verdict(p50(r.bin) <= 50 && p50(r.force) <= 50))
	fmt.Fprintf(&b, "| import 100,000 products from CSV until the async action is done | ≤ 10 s | %.2f s | %s |\n", r.importSecs,
		verdict(r.importSecs <= 10 && r.imported == 100000))
	return b.String()
}
