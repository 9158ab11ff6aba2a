package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/pglocal"
)

// customersRows is how many customers the import section imports: the
// issue's 1,000,000 by default; fewer (-customers-rows) to try the section
// on a shared machine.
var customersRows int

type customersResult struct {
	rows, files            int
	mb                     float64
	imported, importFailed int
	importSecs, copySecs   float64
}

// customerFileMB is the largest file the section posts: an import takes at
// most 10 MB (the reference's limit), so 1,000,000 customers go as several
// files, posted one after the other and imported side by side.
const customerFileMB = 9.5

// benchCustomers times the import of customersRows customers from CSV
// (source_id, name, email, birthdate, city, one metadata column), from the
// first upload until every async action is DONE; the reference is COPY of
// the same rows into the same table.
func benchCustomers(stack *devstack.Stack, p devstack.ProjectCredentials, srv *pglocal.Server, profile string) (customersResult, error) {
	r := customersResult{rows: customersRows}
	ctx := context.Background()
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	pool, err := pgxpool.New(ctx, srv.URL("tally"))
	if err != nil {
		return r, err
	}
	defer pool.Close()
	const header = "Source_id,Name,Email,Birthdate,City,metadata.tier\n"
	var files []*bytes.Buffer
	cur := bytes.NewBufferString(header)
	for i := range r.rows {
		line := fmt.Sprintf("cust-%07d,Customer %07d,c%07d@example.com,1990-01-%02d,Oslo,gold\n", i, i, i, i%28+1)
		if float64(cur.Len()+len(line)) > customerFileMB*1e6 {
			files, cur = append(files, cur), bytes.NewBufferString(header)
		}
		cur.WriteString(line)
	}
	files = append(files, cur)
	r.files = len(files)
	for _, f := range files {
		r.mb += float64(f.Len()) / 1e6
	}
	fmt.Fprintf(os.Stderr, "bench: importing %d customers from %d CSV files, %.1f MB\n", r.rows, r.files, r.mb)
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return r, err
		}
		defer f.Close()
		_ = pprof.StartCPUProfile(f)
	}
	start := time.Now()
	var actions []string
	for _, f := range files {
		id, err := c.upload("/v1/customers/importCSV", f.Bytes())
		if err != nil {
			return r, err
		}
		actions = append(actions, id)
	}
	if r.imported, r.importFailed, err = c.awaitAll(actions); err != nil {
		return r, err
	}
	r.importSecs = time.Since(start).Seconds()
	if profile != "" {
		pprof.StopCPUProfile()
	}
	fmt.Fprintf(os.Stderr, "bench: %d customers imported (%d failed) in %.2f s\n", r.imported, r.importFailed, r.importSecs)

	r.copySecs, err = copyTimed(ctx, pool, "customers", []string{"project_id", "id", "source_id", "name", "email", "attrs", "created_at"},
		r.rows, func(i int, now time.Time) []any {
			attrs, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("Customer %07d", i), "email": fmt.Sprintf("c%07d@example.com", i),
				"birthdate": fmt.Sprintf("1990-01-%02d", i%28+1), "address": map[string]any{"city": "Oslo"}, "metadata": map[string]any{"tier": "gold"}})
			return []any{"proj_bench_copy", fmt.Sprintf("cust_copy%07d", i), fmt.Sprintf("cust-%07d", i), fmt.Sprintf("Customer %07d", i),
				fmt.Sprintf("c%07d@example.com", i), attrs, now}
		})
	if err != nil {
		return r, err
	}
	return r, nil
}

func customersReport(r customersResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Customers: CSV import (issue 37)\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, every request through the router with tracing on.\n\n",
		time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "- **Import.** %d customers (source_id, name, email, birthdate, city, one metadata column), %.1f MB of CSV as %d files "+
		"of at most %.1f MB (an import takes 10 MB), are posted to `POST /v1/customers/importCSV` one after the other. The clock runs "+
		"from the first request until a poll every 20 ms finds every async action DONE. Each row goes through the customers' write "+
		"path (its checks, a `customer.created` notice). The reference is COPY of the same rows into the same table.\n\n",
		r.rows, r.mb, r.files, customerFileMB)
	fmt.Fprintf(&b, "| measure | Tally | reference |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| import %d customers (%d failed rows) until done | %.2f s | %.2f s |\n", r.imported, r.importFailed, r.importSecs, r.copySecs)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	v := "not measured: fewer rows (-customers-rows)"
	if r.rows == 1_000_000 {
		v = verdict(r.importSecs <= 30 && r.imported == 1_000_000)
	}
	fmt.Fprintf(&b, "| import 1,000,000 customers from CSV until the async actions are done | ≤ 30 s | %.2f s (%d rows) | %s |\n",
		r.importSecs, r.rows, v)
	return b.String()
}
