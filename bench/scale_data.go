package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack"
)

// scaleFactor shrinks the scale section's sizes for a trial (-scale-factor).
var scaleFactor = 1.0

// scaleSizes are the three passes' sizes of each kind of row, before
// scaleFactor: the card's own history, the loyalty campaign's ledger (the
// card's included, what the export writes), the project's customers and
// its vouchers.
var scaleSizes = struct{ card, ledger, customers, vouchers [3]int }{
	card:      [3]int{10_000, 100_000, 1_000_000},
	ledger:    [3]int{100_000, 1_000_000, 10_000_000},
	customers: [3]int{10_000, 100_000, 1_000_000},
	vouchers:  [3]int{100_000, 1_000_000, 10_000_000},
}

// scaled is n shrunk by scaleFactor, at least 20.
func scaled(n int) int { return max(20, int(float64(n)*scaleFactor)) }

// scaleRegions is how many values the customers' metadata.region takes:
// a filtered list's matches are a thousandth of the project's customers.
const scaleRegions = 1000

// scaleDepth is how deep the history's cursor page is: 10,000 pages of
// ten entries, or half the card's history when it holds fewer.
const scaleDepth = 100_000

// scaleRun is the data part's state: the project, its templates (rows
// written by the API, which the bulk copies clone) and the sizes reached.
type scaleRun struct {
	ctx   context.Context
	b     *benchRun
	p     devstack.ProjectCredentials
	c     client
	conn  *pgx.Conn
	t0    int64 // Unix ms of the first cloned row's id
	seq   int64 // rows cloned so far, each id's place after t0
	camp  string
	card  struct{ id, code string }
	cards []string // the other cards the ledger's rows go to
	tmpl  struct{ tx, customer, voucher string }
	// the sizes reached, and the ranges of g (ids' places) of the
	// customers and vouchers cloned
	cardN, ledgerN, customersN, vouchersN int
	customerGs, voucherGs                 [][2]int64
	build                                 time.Duration
	rows                                  []scaleRow
	exports                               []exportsResult
}

// scaleRow is one path measured at one size.
type scaleRow struct {
	path     string
	size     int
	depth    int // the history's cursor page: entries in
	p50, p95 float64
	n        int
}

func scaleData(b *benchRun) (string, error) {
	s := &scaleRun{ctx: context.Background(), b: b, t0: time.Now().Add(-30 * 24 * time.Hour).UnixMilli()}
	var err error
	if s.p, err = b.stack.CreateProject(s.ctx, "Scale", "api", "bench"); err != nil {
		return "", err
	}
	s.c = client{base: b.stack.RouterURL, p: s.p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	if s.conn, err = pgx.Connect(s.ctx, b.servers[1].URL("tally")); err != nil {
		return "", err
	}
	defer s.conn.Close(s.ctx)
	if err := s.templates(); err != nil {
		return "", err
	}
	for pass := range 3 {
		start := time.Now()
		if err := s.grow(pass); err != nil {
			return "", err
		}
		s.build += time.Since(start)
		if err := s.measure(pass); err != nil {
			return "", err
		}
	}
	return s.report(), nil
}

// templates writes through the API one row of each kind the passes clone:
// a loyalty campaign with the history's card and others, a ledger entry,
// a customer with metadata, a discount voucher.
func (s *scaleRun) templates() error {
	c := s.c
	camp, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Scale ledger"})
	if err != nil {
		return err
	}
	s.camp = camp["id"].(string)
	for i := range 21 {
		m, err := c.must("POST", "/v1/loyalties/"+s.camp+"/members", map[string]any{"customer": map[string]any{"source_id": fmt.Sprintf("scale-holder-%d", i)}})
		if err != nil {
			return err
		}
		if i == 0 {
			s.card.id, s.card.code = m["id"].(string), m["code"].(string)
		} else {
			s.cards = append(s.cards, m["id"].(string))
		}
	}
	if _, err := c.must("POST", "/v1/loyalties/members/"+s.card.code+"/balance", map[string]any{"points": 1, "reason": "scale"}); err != nil {
		return err
	}
	if _, err := c.must("POST", "/v1/customers", map[string]any{"source_id": "scale-template", "name": "Scale Customer",
		"email": "scale@example.com", "address": map[string]any{"city": "Oslo", "country": "NO"},
		"metadata": map[string]any{"region": "template", "tier": "gold"}}); err != nil {
		return err
	}
	vc, err := c.must("POST", "/v1/campaigns", map[string]any{"name": "Scale vouchers", "campaign_type": "DISCOUNT_COUPONS",
		"vouchers_count": 1, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER", "discount": map[string]any{"type": "PERCENT", "percent_off": 10}}})
	if err != nil {
		return err
	}
	if id, _ := vc["async_action_id"].(string); id != "" {
		if _, err := c.await(id, time.Minute); err != nil {
			return err
		}
	}
	for _, q := range []struct {
		dst *string
		sql string
		arg string
	}{
		{&s.tmpl.tx, `SELECT id FROM loyalty_transactions WHERE project_id = $1 AND card_id = $2 ORDER BY id DESC LIMIT 1`, s.card.id},
		{&s.tmpl.customer, `SELECT id FROM customers WHERE project_id = $1 AND source_id = $2`, "scale-template"},
		{&s.tmpl.voucher, `SELECT id FROM vouchers WHERE project_id = $1 AND campaign_id = $2 LIMIT 1`, vc["id"].(string)},
	} {
		if err := s.conn.QueryRow(s.ctx, q.sql, s.p.ProjectID, q.arg).Scan(q.dst); err != nil {
			return fmt.Errorf("scale: template: %s: %w", q.sql, err)
		}
	}
	return nil
}

// grow brings each kind of row to pass's size, a million rows per
// statement, and vacuums the tables.
func (s *scaleRun) grow(pass int) error {
	sz := scaleSizes
	card, ledger := scaled(sz.card[pass]), scaled(sz.ledger[pass])
	newCard, newOthers := card-s.cardN, (ledger-card)-(s.ledgerN-s.cardN)
	if _, err := s.clone("loyalty_transactions", s.tmpl.tx, newCard, map[string]string{
		"id": "{id}", "created_at": "{at}", "source_id": "'scale-' || g"}); err != nil {
		return err
	}
	if _, err := s.clone("loyalty_transactions", s.tmpl.tx, newOthers, map[string]string{
		"id": "{id}", "created_at": "{at}", "source_id": "'scale-' || g",
		"card_id": fmt.Sprintf("(ARRAY['%s'])[1 + g %% %d]", strings.Join(s.cards, "','"), len(s.cards))}); err != nil {
		return err
	}
	s.cardN, s.ledgerN = card, ledger
	customers := scaled(sz.customers[pass])
	from, err := s.clone("customers", s.tmpl.customer, customers-s.customersN, map[string]string{
		"id": "{id}", "created_at": "{at}", "source_id": "'scale-' || g", "email": "'c' || g || '@example.com'",
		"attrs": fmt.Sprintf(`jsonb_set(jsonb_set(attrs, '{metadata,region}', to_jsonb('r' || (g %% %d))), '{email}', to_jsonb('c' || g || '@example.com'))`,
			scaleRegions)})
	if err != nil {
		return err
	}
	s.customerGs = append(s.customerGs, [2]int64{from, from + int64(customers-s.customersN)})
	s.customersN = customers
	vouchers := scaled(sz.vouchers[pass])
	if from, err = s.clone("vouchers", s.tmpl.voucher, vouchers-s.vouchersN, map[string]string{
		"id": "{id}", "created_at": "{at}", "code": scaleCode}); err != nil {
		return err
	}
	s.voucherGs = append(s.voucherGs, [2]int64{from, from + int64(vouchers-s.vouchersN)})
	s.vouchersN = vouchers
	// Vacuumed and checkpointed as a project's tables are in their steady
	// state: measured right after the copies, the requests met autovacuum
	// and the flushing of their dirty pages (a history page read 5 pages
	// and wrote 5), not the data's size.
	for _, t := range []string{"loyalty_transactions", "customers", "vouchers", "voucher_codes"} {
		if _, err := s.conn.Exec(s.ctx, "VACUUM (ANALYZE) "+t); err != nil {
			return err
		}
	}
	if _, err := s.conn.Exec(s.ctx, "CHECKPOINT"); err != nil {
		return err
	}
	return nil
}

// scaleCode is the code of the cloned voucher g, in SQL.
const scaleCode = `'SC' || lpad(g::TEXT, 9, '0')`

// clone copies the template row id of table n times, each copy with the
// columns of overrides set to their SQL (over g, the copy's number; {id}
// is a fresh id in internal/ids' form with the template's prefix, {at}
// the time it holds) and every other column as the template has it, a
// million copies per statement. The vouchers' codes go into the registry
// as their writers put them.
func (s *scaleRun) clone(table, id string, n int, overrides map[string]string) (int64, error) {
	first := s.seq
	if n <= 0 {
		return first, nil
	}
	rows, err := s.conn.Query(s.ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		return first, err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return first, err
	}
	prefix := id[:len(id)-22]
	ms := fmt.Sprintf("(%d + g / 1000)", s.t0)
	idSQL := fmt.Sprintf(`'%s' || lpad(to_hex(%s), 12, '0') || lpad(to_hex(g %% 1000 + 4096), 10, '0')`, prefix, ms)
	atSQL := fmt.Sprintf(`to_timestamp(%s / 1000.0)`, ms)
	exprs := make([]string, len(cols))
	for i, col := range cols {
		exprs[i] = col
		if o, ok := overrides[col]; ok {
			exprs[i] = strings.NewReplacer("{id}", idSQL, "{at}", atSQL).Replace(o)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: scale: %d rows into %s\n", n, table)
	const chunk = 1_000_000
	for from := int64(0); from < int64(n); from += chunk {
		lo, hi := s.seq+from, s.seq+min(from+chunk, int64(n))-1
		sql := fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM %s AS t, generate_series($3::INT8, $4::INT8) AS g
			WHERE t.project_id = $1 AND t.id = $2`, table, strings.Join(cols, ", "), strings.Join(exprs, ", "), table)
		if _, err := s.conn.Exec(s.ctx, sql, s.p.ProjectID, id, lo, hi); err != nil {
			return first, fmt.Errorf("scale: clone %s: %w", table, err)
		}
		if table == "vouchers" {
			if _, err := s.conn.Exec(s.ctx, fmt.Sprintf(`INSERT INTO voucher_codes (project_id, code, voucher_id)
				SELECT $1, %s, %s FROM generate_series($2::INT8, $3::INT8) AS g`, scaleCode, idSQL), s.p.ProjectID, lo, hi); err != nil {
				return first, fmt.Errorf("scale: codes: %w", err)
			}
		}
	}
	s.seq += int64(n)
	return first, nil
}

// timed calls f for the phase's length (at least 50 times, at most
// 20,000), one call at a time, and answers its p50 and p95 in ms; any
// error (a status other than 200, an answer without what it must hold)
// ends the run.
func (s *scaleRun) timed(path string, size, depth int, f func(i int) error) error {
	var xs []float64
	end := time.Now().Add(s.b.d)
	for i := 0; (time.Now().Before(end) || i < 50) && i < 20_000; i++ {
		start := time.Now()
		if err := f(i); err != nil {
			return fmt.Errorf("scale: %s at %d: %w", path, size, err)
		}
		xs = append(xs, float64(time.Since(start).Microseconds())/1000)
	}
	sort.Float64s(xs)
	r := scaleRow{path: path, size: size, depth: depth, p50: quantile(xs, 0.5), p95: quantile(xs, 0.95), n: len(xs)}
	fmt.Fprintf(os.Stderr, "bench: scale: %s at %d: p50 %.2f ms, p95 %.2f ms (%d requests)\n", path, size, r.p50, r.p95, r.n)
	s.rows = append(s.rows, r)
	return nil
}

// measure times each path at the sizes pass reached.
func (s *scaleRun) measure(pass int) error {
	if err := s.history(); err != nil {
		return err
	}
	if err := s.customersList(); err != nil {
		return err
	}
	if err := s.voucherReads(); err != nil {
		return err
	}
	var r exportsResult
	if err := exportsCopy(s.ctx, &r, s.conn, s.p, s.camp); err != nil {
		return err
	}
	res, err := exportsRun(&r, s.c, s.camp, "")
	if err != nil {
		return err
	}
	if r.rows != int64(s.ledgerN)+1 { // the clones and their template
		return fmt.Errorf("scale: the export wrote %d rows of %d", r.rows, s.ledgerN+1)
	}
	if err := exportsDownload(&r, s.b.stack, res); err != nil {
		return err
	}
	s.exports = append(s.exports, r)
	fmt.Fprintf(os.Stderr, "bench: scale: export of %d: %.2f s (COPY %.2f s), download %.2f s, peak RSS %.0f MB (idle %.0f MB)\n",
		r.rows, r.exportSecs, r.copySecs, r.downloadSecs, float64(r.peakRSS)/1e6, float64(r.idleRSS)/1e6)
	_ = pass
	return nil
}

// history times the card's first page and a page deep by cursor, each
// answer checked against the ledger's ids.
func (s *scaleRun) history() error {
	path := "/v1/loyalties/members/" + s.card.code + "/transactions"
	first, err := s.c.must("GET", path+"?limit=10", nil)
	if err != nil {
		return err
	}
	data, _ := first["data"].([]any)
	if len(data) != 10 || first["has_more"] != true {
		return fmt.Errorf("scale: the history's first page: %v", first)
	}
	desc := data[0].(map[string]any)["id"].(string) > data[1].(map[string]any)["id"].(string)
	order := "id"
	if desc {
		order = "id DESC"
	}
	depth := min(scaleDepth, s.cardN/2)
	var cursor, next string
	if err := s.conn.QueryRow(s.ctx, `SELECT id, lead(id) OVER (ORDER BY `+order+`) FROM loyalty_transactions
		WHERE project_id = $1 AND card_id = $2 ORDER BY `+order+` OFFSET $3 LIMIT 1`,
		s.p.ProjectID, s.card.id, depth-1).Scan(&cursor, &next); err != nil {
		return err
	}
	newest := data[0].(map[string]any)["id"].(string)
	page := func(q, want string) func(int) error {
		return func(int) error {
			m, err := s.c.must("GET", path+q, nil)
			if err != nil {
				return err
			}
			d, _ := m["data"].([]any)
			if len(d) != 10 || d[0].(map[string]any)["id"] != want {
				return fmt.Errorf("page %s: %d entries, first %v, want %s", q, len(d), d, want)
			}
			return nil
		}
	}
	if err := s.timed("card history, first page", s.cardN, 0, page("?limit=10", newest)); err != nil {
		return err
	}
	return s.timed("card history, cursor page", s.cardN, depth, page("?limit=10&starting_after_id="+cursor, next))
}

// customersList times the list filtered by one region (a thousandth of
// the customers), each answer's total and rows checked.
func (s *scaleRun) customersList() error {
	rng := rand.New(rand.NewPCG(1, 2))
	// below(x, k): the g in [0, x) of region k.
	below := func(x, k int64) int64 { return x/scaleRegions + min(1, max(0, x%scaleRegions-k)) }
	return s.timed("customers filtered by metadata", s.customersN, 0, func(int) error {
		k := rng.Int64N(scaleRegions)
		var want int64
		for _, r := range s.customerGs {
			want += below(r[1], k) - below(r[0], k)
		}
		m, err := s.c.must("GET", fmt.Sprintf("/v1/customers?limit=10&filters[metadata.region][conditions][$is]=r%d", k), nil)
		if err != nil {
			return err
		}
		cs, _ := m["customers"].([]any)
		total, _ := m["total"].(float64)
		if int64(total) != want || len(cs) != int(min(10, want)) {
			return fmt.Errorf("region r%d: total %v, %d customers, want %d", k, m["total"], len(cs), want)
		}
		for _, c := range cs {
			if md, _ := c.(map[string]any)["metadata"].(map[string]any); md["region"] != fmt.Sprintf("r%d", k) {
				return fmt.Errorf("region r%d: a customer of %v", k, md)
			}
		}
		return nil
	})
}

// voucherReads times reading a voucher by code and validating it, the
// codes drawn from every clone made so far.
func (s *scaleRun) voucherReads() error {
	rng := rand.New(rand.NewPCG(3, 4))
	var all int64
	for _, r := range s.voucherGs {
		all += r[1] - r[0]
	}
	code := func() string {
		k := rng.Int64N(all)
		for _, r := range s.voucherGs {
			if k < r[1]-r[0] {
				return fmt.Sprintf("SC%09d", r[0]+k)
			}
			k -= r[1] - r[0]
		}
		panic("unreachable")
	}
	codes := make([]string, 500)
	for i := range codes {
		codes[i] = code()
	}
	if err := s.timed("voucher by code", s.vouchersN, 0, func(i int) error {
		c := codes[i%len(codes)]
		m, err := s.c.must("GET", "/v1/vouchers/"+c, nil)
		if err == nil && m["code"] != c {
			err = fmt.Errorf("GET %s: %v", c, m["code"])
		}
		return err
	}); err != nil {
		return err
	}
	return s.timed("validation by code", s.vouchersN, 0, func(i int) error {
		c := codes[i%len(codes)]
		m, err := s.c.must("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": c}},
			"order": map[string]any{"amount": 10000}})
		if err == nil && m["valid"] != true {
			err = fmt.Errorf("validation of %s: %v", c, m)
		}
		return err
	})
}

// report is the data part of the scale section: each path's p50 / p95 at
// each size with its growth, the exports beside COPY, and the goals.
func (s *scaleRun) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### The data paths\n\n")
	fmt.Fprintf(&b, "A project of its own is grown in three passes (the data built by cloning, with `INSERT … SELECT` over "+
		"`generate_series` on the server, rows the API wrote: a ledger entry, a customer, a discount voucher, each column as the "+
		"service wrote it but the id (in `internal/ids`' form), the time, codes, source ids and the customer's `metadata.region`, one "+
		"of %d values; the vouchers' codes go into the code registry too), vacuumed and checkpointed, and each path is then timed one request at a "+
		"time through the router for %s, every answer checked (a 200 holding the expected rows: the page's first id, the "+
		"filter's exact total and matches, the voucher's code, `valid: true`). Growth is the largest size's p50 ÷ the smallest's. "+
		"Building the data took %.0f s in all.", scaleRegions, s.b.d, s.build.Seconds())
	if scaleFactor != 1 {
		fmt.Fprintf(&b, " **A trial at -scale-factor %g: the sizes are not the goals'.**", scaleFactor)
	}
	b.WriteString("\n\n| path | sizes | p50 / p95 ms at each | growth of p50 |\n|---|---|---|---|\n")
	var paths []string
	byPath := map[string][]scaleRow{}
	for _, r := range s.rows {
		if byPath[r.path] == nil {
			paths = append(paths, r.path)
		}
		byPath[r.path] = append(byPath[r.path], r)
	}
	for _, p := range paths {
		rs := byPath[p]
		var sizes, cells []string
		for _, r := range rs {
			sz := fmt.Sprintf("%d", r.size)
			if r.depth > 0 {
				sz += fmt.Sprintf(" (%d in)", r.depth)
			}
			sizes = append(sizes, sz)
			cells = append(cells, fmt.Sprintf("%.2f / %.2f", r.p50, r.p95))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f× |\n", p, strings.Join(sizes, ", "), strings.Join(cells, "; "), rs[len(rs)-1].p50/rs[0].p50)
	}
	b.WriteString("\n| export of the campaign's ledger | to DONE | COPY (best of two) | export ÷ COPY rows/s | with the download | " +
		"resident memory idle, peak (above idle) | live heap idle, peak (above idle) |\n|---|---|---|---|---|---|---|\n")
	for _, r := range s.exports {
		fmt.Fprintf(&b, "| %d rows, %.0f MB | %.2f s | %.2f s | %.2f | %.2f (download %.2f s) | %.0f MB, %.0f MB (%.0f MB) | %.0f MB, %.0f MB (%.0f MB) |\n",
			r.rows, float64(r.bytes)/1e6, r.exportSecs, r.copySecs, r.copySecs/r.exportSecs, r.copySecs/(r.exportSecs+r.downloadSecs),
			r.downloadSecs, float64(r.idleRSS)/1e6, float64(r.peakRSS)/1e6, float64(r.peakRSS-r.idleRSS)/1e6,
			float64(r.idleLive)/1e6, float64(r.peakLive)/1e6, float64(r.peakLive-r.idleLive)/1e6)
	}
	last := func(path string) scaleRow {
		rs := byPath[path]
		if len(rs) == 0 {
			return scaleRow{}
		}
		return rs[len(rs)-1]
	}
	// A trial's sizes are not the goals': no verdict.
	verdict := func(ok bool) string {
		if scaleFactor != 1 {
			return "trial"
		}
		return verdict(ok)
	}
	b.WriteString("\n| goal | target | measured | |\n|---|---|---|---|\n")
	for _, g := range []struct {
		name, path string
		max        float64
	}{
		{"card history at 1,000,000 entries, first page", "card history, first page", 3},
		{"card history at 1,000,000 entries, a cursor page 10,000 pages in", "card history, cursor page", 3},
		{"customers filtered by metadata at 1,000,000", "customers filtered by metadata", 20},
		{"voucher by code at 10,000,000", "voucher by code", 2},
	} {
		r := last(g.path)
		fmt.Fprintf(&b, "| %s, p50 | ≤ %g ms | %.2f ms at %d | %s |\n", g.name, g.max, r.p50, r.size, verdict(r.p50 <= g.max))
	}
	if n := len(s.exports); n > 0 {
		r := s.exports[n-1]
		fmt.Fprintf(&b, "| export of 10,000,000 entries, rows/s ÷ COPY's (to DONE; downloaded) | ≥ 0.5 | %.2f; %.2f | %s |\n",
			r.copySecs/r.exportSecs, r.copySecs/(r.exportSecs+r.downloadSecs), verdict(r.copySecs/r.exportSecs >= 0.5))
		fmt.Fprintf(&b, "| its peak resident memory above idle | ≤ 150 MB | %.0f MB | %s |\n", float64(r.peakRSS-r.idleRSS)/1e6,
			verdict(r.peakRSS-r.idleRSS <= 150e6))
		fmt.Fprintf(&b, "| its peak live heap above idle (what the export held; %s) | ≤ 150 MB | %.0f MB | %s |\n", "GOGC "+fmt.Sprint(r.gogc),
			float64(r.peakLive-r.idleLive)/1e6, verdict(r.peakLive-r.idleLive <= 150e6))
	}
	return b.String()
}
