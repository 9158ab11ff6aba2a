package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/pglocal"
)

// ordersRows is how many orders the orders section imports: the issue's
// 100,000 by default (50 requests of 2,000); fewer (-orders-rows) to try
// the section on a shared machine.
var ordersRows int

type ordersResult struct {
	rows, requests         int
	imported, importFailed int
	importSecs, copySecs   float64
}

// orderBatch is the reference's limit of orders a request.
const orderBatch = 2000

// benchOrders times the import of ordersRows orders (each PAID, with a
// line, metadata and, one in ten, a customer object) through POST
// /v1/orders/import in requests of 2,000, from the first request until
// every async action is DONE (the imports of a project run one after the
// other); the reference is COPY of the same rows into the same table.
func benchOrders(stack *devstack.Stack, p devstack.ProjectCredentials, srv *pglocal.Server) (ordersResult, error) {
	r := ordersResult{rows: ordersRows}
	ctx := context.Background()
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	order := func(i int) map[string]any {
		o := map[string]any{"source_id": fmt.Sprintf("ord-%07d", i), "status": "PAID", "amount": 1000 + i%100,
			"items":    []any{map[string]any{"product_id": "prod_bench", "quantity": 1, "price": 1000 + i%100}},
			"metadata": map[string]any{"placed": "2024-01-02"}}
		if i%10 == 0 {
			o["customer"] = map[string]any{"source_id": fmt.Sprintf("buyer-%06d", i/10)}
		}
		return o
	}
	var bodies [][]any
	for from := 0; from < r.rows; from += orderBatch {
		body := make([]any, 0, orderBatch)
		for i := from; i < min(r.rows, from+orderBatch); i++ {
			body = append(body, order(i))
		}
		bodies = append(bodies, body)
	}
	r.requests = len(bodies)
	fmt.Fprintf(os.Stderr, "bench: importing %d orders in %d requests\n", r.rows, r.requests)
	start := time.Now()
	var actions []string
	for _, body := range bodies {
		m, err := c.must("POST", "/v1/orders/import", body)
		if err != nil {
			return r, err
		}
		actions = append(actions, m["async_action_id"].(string))
	}
	var err error
	if r.imported, r.importFailed, err = c.awaitAll(actions); err != nil {
		return r, err
	}
	r.importSecs = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "bench: %d orders imported (%d failed) in %.2f s\n", r.imported, r.importFailed, r.importSecs)

	pool, err := pgxpool.New(ctx, srv.URL("tally"))
	if err != nil {
		return r, err
	}
	defer pool.Close()
	r.copySecs, err = copyTimed(ctx, pool, "orders", []string{"project_id", "id", "source_id", "status", "amount", "items", "metadata",
		"created_at", "paid_at"}, r.rows, func(i int, now time.Time) []any {
		o := order(i)
		items, _ := json.Marshal([]any{map[string]any{"product_id": "prod_bench", "quantity": 1, "price": 1000 + i%100,
			"amount": 1000 + i%100, "object": "order_item"}})
		meta, _ := json.Marshal(o["metadata"])
		return []any{"proj_bench_copy", fmt.Sprintf("ord_copy%07d", i), o["source_id"], "PAID", int64(1000 + i%100), items, meta, now, now}
	})
	if err != nil {
		return r, err
	}
	return r, nil
}

func ordersReport(r ordersResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Orders: import (issue 38)\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, every request through the router with tracing on.\n\n",
		time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "- **Import.** %d orders (PAID, one line, metadata; one in ten with a customer object, made or updated "+
		"by source_id) are posted to `POST /v1/orders/import` as %d requests of at most 2,000 (the reference's limit), one "+
		"after the other. A project's imports run one at a time, in order. The clock runs from the first request until a "+
		"poll every 20 ms finds every async action DONE. The reference is COPY of the same rows into the same table.\n\n",
		r.rows, r.requests)
	fmt.Fprintf(&b, "| measure | Tally | reference |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| import %d orders (%d failed) until done | %.2f s | %.2f s |\n", r.imported, r.importFailed, r.importSecs, r.copySecs)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	v := "not measured: fewer rows (-orders-rows)"
	if r.rows == 100_000 {
		v = verdict(r.importSecs <= 10 && r.imported == 100_000)
	}
	fmt.Fprintf(&b, "| import 100,000 orders until the async actions are done | ≤ 10 s | %.2f s (%d rows) | %s |\n",
		r.importSecs, r.rows, v)
	return b.String()
}
