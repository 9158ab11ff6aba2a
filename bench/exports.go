package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack"
	"github.com/tallyhq/tally/internal/pglocal"
)

const (
	exportCards        = 10_000
	exportPerCard      = 100
	exportTransactions = exportCards * exportPerCard
)

type exportsResult struct {
	rows       int64
	bytes      int64
	exportSecs float64 // request to DONE, through the router
	copySecs   float64 // COPY (SELECT …) TO STDOUT WITH CSV of the same rows
	copyBytes  int64
	exportMemory
	downloadSecs  float64
	downloadBytes int64
}

// benchExports measures exporting a loyalty campaign's 1,000,000
// transactions: the time to DONE beside PostgreSQL's own COPY of the same
// rows on the same server, the process's resident memory meanwhile, and
// the file's download through the router.
func benchExports(stack *devstack.Stack, p devstack.ProjectCredentials, srv *pglocal.Server, profile string) (exportsResult, error) {
	var r exportsResult
	ctx := context.Background()
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	camp, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Export bench", "vouchers_count": 0,
		"voucher": map[string]any{"type": "LOYALTY_CARD", "loyalty_card": map[string]any{"points": 0}}})
	if err != nil {
		return r, err
	}
	campID := camp["id"].(string)
	conn, err := pgx.Connect(ctx, srv.URL("tally"))
	if err != nil {
		return r, err
	}
	defer conn.Close(ctx)
	if err := exportsSeed(ctx, conn, p, campID); err != nil {
		return r, err
	}
	if err := exportsCopy(ctx, &r, conn, p, campID); err != nil {
		return r, err
	}
	if profile != "" {
		defer pprof.StopCPUProfile()
	}
	res, err := exportsRun(&r, c, campID, profile)
	if err != nil {
		return r, err
	}
	return r, exportsDownload(&r, stack, res)
}

// exportsSeed writes 10,000 cards of 100 entries each into campID as
// set-based SQL: what is measured is the export, not the ledger's writes.
// The entries look like the ledger's own additions, details and all.
func exportsSeed(ctx context.Context, conn *pgx.Conn, p devstack.ProjectCredentials, campID string) error {
	if _, err := conn.Exec(ctx, `INSERT INTO loyalty_cards (project_id, id, code, campaign_id, points, balance, created_at)
		SELECT $1, 'v_bench' || lpad(g::TEXT, 6, '0'), 'BENCH-' || g, $2, 5050, 5050, now()
		FROM generate_series(1, $3::INT8) AS g`, p.ProjectID, campID, exportCards); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `INSERT INTO loyalty_transactions (project_id, id, card_id, campaign_id, type, delta, source_id,
		source, reason, details, created_at)
		SELECT $1, 'lt_bench' || lpad(g::TEXT, 8, '0'), 'v_bench' || lpad((g % $3::INT8 + 1)::TEXT, 6, '0'), $2,
			'POINTS_ADDITION', g / $3::INT8 + 1, 'crm-' || g, 'API', 'bench entry ' || g,
			jsonb_build_object('balance', jsonb_build_object('type', 'loyalty_card', 'total', (g / $3::INT8 + 1) * (g / $3::INT8 + 2) / 2,
				'object', 'balance', 'points', g / $3::INT8 + 1, 'balance', (g / $3::INT8 + 1) * (g / $3::INT8 + 2) / 2,
				'operation_type', 'MANUAL', 'related_object', jsonb_build_object('id', 'v_bench' || lpad((g % $3::INT8 + 1)::TEXT, 6, '0'), 'type', 'voucher'))),
			now() - make_interval(secs => ($4::INT8 - g))
		FROM generate_series(0, $4::INT8 - 1) AS g`, p.ProjectID, campID, exportCards, exportTransactions); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, `ANALYZE loyalty_transactions`)
	return err
}

// exportsCopy times the reference: COPY of the same rows, columns and
// order, on the same server.
func exportsCopy(ctx context.Context, r *exportsResult, conn *pgx.Conn, p devstack.ProjectCredentials, campID string) error {
	copySQL := fmt.Sprintf(`COPY (SELECT t.id, t.type, t.source_id, t.reason, t.source, (t.details->'balance'->>'balance')::INT8,
		(t.details->'balance'->>'points')::INT8, t.created_at FROM loyalty_transactions t
		WHERE t.project_id = '%s' AND t.campaign_id = '%s' ORDER BY t.id) TO STDOUT WITH CSV HEADER`, p.ProjectID, campID)
	var best time.Duration
	for range 2 { // the better of two: the first also warms the cache
		cw := &countingWriter{}
		start := time.Now()
		if _, err := conn.PgConn().CopyTo(ctx, cw, copySQL); err != nil {
			return err
		}
		if el := time.Since(start); best == 0 || el < best {
			best, r.copyBytes = el, cw.n
		}
	}
	r.copySecs = best.Seconds()
	return nil
}

// exportsRun times the export, from the request until a poll every 50 ms
// finds it DONE, memory sampled meanwhile; it answers the
// export's result.
func exportsRun(r *exportsResult, c client, campID, profile string) (map[string]any, error) {
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	stopSampling := sampleExportMemory()
	defer stopSampling() // on an error
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return nil, err
		}
		_ = pprof.StartCPUProfile(f) // stopped by benchExports, after the download
	}
	start := time.Now()
	ex, err := c.must("POST", "/v1/loyalties/"+campID+"/transactions/export", nil)
	if err != nil {
		return nil, err
	}
	for ex["status"] != "DONE" {
		if ex["status"] == "ERROR" || time.Since(start) > 5*time.Minute {
			return nil, fmt.Errorf("export: %v", ex)
		}
		time.Sleep(50 * time.Millisecond)
		if ex, err = c.must("GET", "/v1/exports/"+ex["id"].(string), nil); err != nil {
			return nil, err
		}
	}
	r.exportSecs = time.Since(start).Seconds()
	r.exportMemory = stopSampling()
	res := ex["result"].(map[string]any)
	r.rows = int64(res["rows"].(float64))
	for _, part := range res["parts"].([]any) {
		r.bytes += int64(part.(map[string]any)["bytes"].(float64))
	}
	return res, nil
}

// exportsDownload times the download through the router, from the link
// alone, as a browser would: the cluster's download host, the bytes as
// stored.
func exportsDownload(r *exportsResult, stack *devstack.Stack, res map[string]any) error {
	link, err := url.Parse(res["url"].(string))
	if err != nil {
		return err
	}
	router := strings.TrimPrefix(stack.RouterURL, "http://")
	dl := &http.Client{Transport: &http.Transport{DisableCompression: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, router)
		}}}
	var bestDL time.Duration
	for range 3 {
		start := time.Now()
		res, err := dl.Get(link.String())
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 {
			return fmt.Errorf("download: %d %v", res.StatusCode, err)
		}
		if el := time.Since(start); bestDL == 0 || el < bestDL {
			bestDL, r.downloadBytes = el, n
		}
	}
	r.downloadSecs = bestDL.Seconds()
	return nil
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// rss is the process's resident set in bytes.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func exportsReport(r exportsResult) string {
	var b strings.Builder
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	fmt.Fprintf(&b, "## Exports: 1,000,000 loyalty transactions to CSV\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s: the platform as above, in one process. A loyalty campaign of %d cards × %d "+
		"entries (written by SQL, shaped like the ledger's additions) is exported with `POST /v1/loyalties/{id}/transactions/export` "+
		"and no body (the default columns); the clock runs from the request until a poll every 50 ms finds the export DONE. "+
		"The reference is PostgreSQL's `COPY (SELECT …) TO STDOUT WITH CSV` of the same rows, columns and order on the same server "+
		"(the better of two runs). "+exportMemoryMeaning+" The download is the file from its link alone, through the router "+
		"from the download host, without compression (the best of three).\n\n", time.Now().UTC().Format("2006-01-02"), exportCards, exportPerCard)
	expRate, copyRate := float64(r.rows)/r.exportSecs, float64(r.rows)/r.copySecs
	fmt.Fprintf(&b, "| measure | Tally | reference |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| %d rows to CSV (%.0f MB / %.0f MB) | %.2f s, %.0f rows/s | %.2f s, %.0f rows/s |\n", r.rows,
		mb(r.bytes), mb(r.copyBytes), r.exportSecs, expRate, r.copySecs, copyRate)
	fmt.Fprintf(&b, "| resident memory: idle, peak during the export | %.0f MB, %.0f MB | |\n", mb(r.idleRSS), mb(r.peakRSS))
	fmt.Fprintf(&b, "| %s | |\n", r.heapCells())
	fmt.Fprintf(&b, "| download of the %.0f MB file through the router | %.2f s, %.0f MB/s | |\n", mb(r.downloadBytes),
		r.downloadSecs, mb(r.downloadBytes)/r.downloadSecs)
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| export rows/s ÷ COPY rows/s | ≥ 0.5 | %.2f | %s |\n", expRate/copyRate, verdict(expRate/copyRate >= 0.5))
	fmt.Fprintf(&b, "| request to DONE | ≤ 10 s | %.2f s | %s |\n", r.exportSecs, verdict(r.exportSecs <= 10 && r.rows == exportTransactions))
	fmt.Fprintf(&b, "| peak resident memory above idle | ≤ 150 MB | %.0f MB | %s |\n", mb(r.peakRSS-r.idleRSS),
		verdict(r.peakRSS-r.idleRSS <= 150e6))
	fmt.Fprintf(&b, "| peak live heap above idle (what the export held) | ≤ 150 MB | %.0f MB | %s |\n", mb(r.peakLive-r.idleLive),
		verdict(r.peakLive-r.idleLive <= 150e6))
	fmt.Fprintf(&b, "| download through the router | ≥ 200 MB/s | %.0f MB/s | %s |\n", mb(r.downloadBytes)/r.downloadSecs,
		verdict(mb(r.downloadBytes)/r.downloadSecs >= 200))
	return b.String()
}
