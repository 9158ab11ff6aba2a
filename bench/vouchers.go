package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/pglocal"
)

type vouchersResult struct {
	count   int
	genSecs float64
	jobSecs float64 // the action's own processing_time
	// The CSV import of count codes, and COPY of the same rows.
	importSecs, importJobSecs, copySecs float64
	imported, importFailed              int
	csvMB                               float64
}

// benchVouchers measures a discount campaign of 100,000 vouchers: from
// POST /v1/campaigns until its CAMPAIGN.VOUCHERS_GENERATE action is DONE.
func benchVouchers(stack *devstack.Stack, p devstack.ProjectCredentials, srv *pglocal.Server) (vouchersResult, error) {
	r := vouchersResult{count: 100_000}
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	fmt.Fprintln(os.Stderr, "bench: a discount campaign with 100,000 vouchers")
	start := time.Now()
	camp, err := c.must("POST", "/v1/campaigns", map[string]any{"name": "Bench discounts", "campaign_type": "DISCOUNT_COUPONS",
		"vouchers_count": r.count, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER",
			"discount":    map[string]any{"type": "PERCENT", "percent_off": 10, "amount_limit": 5000},
			"code_config": map[string]any{"length": 10, "prefix": "D-", "charset": "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"}}})
	if err != nil {
		return r, err
	}
	id, _ := camp["async_action_id"].(string)
	if id == "" {
		return r, fmt.Errorf("campaign: no async action in %v", camp)
	}
	act, err := c.await(id, 5*time.Minute)
	if err != nil {
		return r, fmt.Errorf("voucher generation: %w", err)
	}
	r.genSecs = time.Since(start).Seconds()
	if ms, ok := act["processing_time"].(float64); ok {
		r.jobSecs = ms / 1000
	}

	// The CSV import of as many codes, until its action is done; the
	// reference is COPY of the same rows into the same table.
	var csv bytes.Buffer
	csv.WriteString("Code,Discount Type,Value,Category,Redemption Limit,Shop\n")
	for i := range r.count {
		fmt.Fprintf(&csv, "CSV-%07d,AMOUNT,%d,imported,1,north\n", i, 100+i%900)
	}
	r.csvMB = float64(csv.Len()) / 1e6
	fmt.Fprintf(os.Stderr, "bench: importing %d vouchers from a %.1f MB CSV file\n", r.count, r.csvMB)
	start = time.Now()
	id, err = c.upload("/v1/vouchers/importCSV", csv.Bytes())
	if err != nil {
		return r, err
	}
	act, err = c.await(id, 5*time.Minute)
	if err != nil {
		return r, fmt.Errorf("voucher import: %w", err)
	}
	r.importSecs = time.Since(start).Seconds()
	r.importJobSecs = act["processing_time"].(float64) / 1000
	res := act["result"].(map[string]any)
	r.imported, r.importFailed = int(res["done_count"].(float64)), int(res["failed_count"].(float64))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, srv.URL("tally"))
	if err != nil {
		return r, err
	}
	defer pool.Close()
	start = time.Now()
	rows := make([][]any, r.count)
	now := time.Now()
	for i := range rows {
		rows[i] = []any{"proj_bench_copy", fmt.Sprintf("v_copy%07d", i), fmt.Sprintf("CSV-%07d", i), "DISCOUNT_VOUCHER",
			fmt.Sprintf(`{"discount":{"type":"AMOUNT","amount_off":%d},"metadata":{"Shop":"north"}}`, 100+i%900), "imported", true, int64(1), now}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"vouchers"}, []string{"project_id", "id", "code", "type", "attrs", "category", "active",
		"redemption_quantity", "created_at"}, pgx.CopyFromRows(rows)); err != nil {
		return r, err
	}
	r.copySecs = time.Since(start).Seconds()
	return r, nil
}

func vouchersReport(r vouchersResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Vouchers\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above. A `DISCOUNT_COUPONS` campaign of %d vouchers "+
		"(10 %% off, 10-character codes from a 32-character set) is created with `POST /v1/campaigns`; the clock runs from the "+
		"request until a poll every 20 ms finds its `CAMPAIGN.VOUCHERS_GENERATE` action DONE. The CSV import: a file of %d codes "+
		"(%.1f MB: code, an AMOUNT discount, category, redemption limit, a metadata column) posted to `POST /v1/vouchers/importCSV`, "+
		"the clock running until its `VOUCHERS.IMPORT_CSV` action is DONE; the reference is COPY of the same rows into the "+
		"vouchers table (pgx CopyFrom).\n\n", time.Now().UTC().Format("2006-01-02"), r.count, r.count, r.csvMB)
	fmt.Fprintf(&b, "| measure | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| campaign with %d vouchers, POST to async action DONE (of which the job ran) | %.2f s (%.2f s) |\n", r.count, r.genSecs, r.jobSecs)
	fmt.Fprintf(&b, "| CSV import of %d codes, upload to async action DONE (of which the job ran; %d imported, %d failed) | %.2f s (%.2f s) |\n",
		r.count, r.imported, r.importFailed, r.importSecs, r.importJobSecs)
	fmt.Fprintf(&b, "| COPY of the same rows into the vouchers table | %.2f s |\n", r.copySecs)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| 100,000 discount vouchers generated | ≤ 6 s | %.2f s | %s |\n", r.genSecs, verdict(r.genSecs <= 6))
	fmt.Fprintf(&b, "| voucher CSV import of 100,000 codes beside COPY | ≤ 10 s | %.2f s (COPY %.2f s) | %s |\n", r.importSecs, r.copySecs,
		verdict(r.importSecs <= 10 && r.imported == r.count))
	return b.String()
}
