package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tallyhq/tally/internal/pglocal"
)

// segmentCustomers is how many customers the segments' recomputation
// reads: the 1,000,000 by default, fewer (-segment-customers) to
// try it on a shared machine.
var segmentCustomers int

// segmentsResult is the segments' figures.
type segmentsResult struct {
	customers, members int
	inProject          int // the project's customers the segment was evaluated over (the import section's too)
	syncSecs, copySecs float64
	updates            []float64 // ms from a customer's update until its segments say so
}

// benchSegments puts segmentCustomers customers into the project (COPY,
// timed as the reference), makes an auto-update segment of a tenth of
// them, and times its evaluation over all of them until its
// initial_sync_status is DONE; then updates customers one at a time into
// the segment and times each until GET /v1/customers/{id}/segments lists
// it.
func benchSegments(c client, srv *pglocal.Server, projectID string) (segmentsResult, error) {
	r := segmentsResult{customers: segmentCustomers}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, srv.URL("tally"))
	if err != nil {
		return r, err
	}
	defer pool.Close()
	fmt.Fprintf(os.Stderr, "bench: segments: %d customers by COPY\n", r.customers)
	start := time.Now()
	now := time.Now()
	src := pgx.CopyFromSlice(r.customers, func(i int) ([]any, error) {
		tier := "silver"
		if i%10 == 0 {
			tier = "gold"
		}
		attrs, err := json.Marshal(map[string]any{"name": fmt.Sprintf("Segment %07d", i), "address": map[string]any{"city": "Oslo"},
			"metadata": map[string]any{"tier": tier, "visits": i % 50}})
		return []any{projectID, fmt.Sprintf("cust_seg%07d", i), fmt.Sprintf("seg-%07d", i), fmt.Sprintf("Segment %07d", i), nil, attrs, now}, err
	})
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"customers"}, []string{"project_id", "id", "source_id", "name", "email", "attrs", "created_at"}, src); err != nil {
		return r, err
	}
	r.copySecs = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "bench: segments: an auto-update segment over them (%.1f s to COPY)\n", r.copySecs)
	start = time.Now()
	seg, err := c.must("POST", "/v1/segments", map[string]any{"name": "Gold at scale", "type": "auto-update",
		"filter": map[string]any{"junction": "and", "metadata.tier": map[string]any{"conditions": map[string]any{"$is": []any{"gold"}}},
			"address.city": map[string]any{"conditions": map[string]any{"$is": []any{"Oslo"}}}}})
	if err != nil {
		return r, err
	}
	id := seg["id"].(string)
	for status := seg["initial_sync_status"]; status != "DONE"; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Minute {
			return r, fmt.Errorf("segments: %s still %v after 10 minutes", id, status)
		}
		got, err := c.must("GET", "/v1/segments/"+id, nil)
		if err != nil {
			return r, err
		}
		status = got["initial_sync_status"]
	}
	r.syncSecs = time.Since(start).Seconds()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM segment_members WHERE project_id = $1 AND segment_id = $2`, projectID, id).Scan(&r.members); err != nil {
		return r, err
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM customers WHERE project_id = $1`, projectID).Scan(&r.inProject); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "bench: segments: %d members in %.2f s; single updates\n", r.members, r.syncSecs)
	for i := 0; i < 200; i++ {
		cust := fmt.Sprintf("seg-%07d", 10*i+1) // silver: not in it
		t0 := time.Now()
		if _, err := c.must("PUT", "/v1/customers/"+cust, map[string]any{"metadata": map[string]any{"tier": "gold", "visits": 1}}); err != nil {
			return r, err
		}
		for {
			l, err := c.must("GET", "/v1/customers/"+cust+"/segments", nil)
			if err != nil {
				return r, err
			}
			if strings.Contains(fmt.Sprint(l["data"]), id) {
				break
			}
			if time.Since(t0) > time.Minute {
				return r, fmt.Errorf("segments: %s not in %s a minute after its update", cust, id)
			}
			time.Sleep(10 * time.Millisecond)
		}
		r.updates = append(r.updates, float64(time.Since(t0).Microseconds())/1000)
	}
	return r, nil
}

func segmentsReport(r segmentsResult) string {
	var b strings.Builder
	xs := append([]float64(nil), r.updates...)
	sort.Float64s(xs)
	q := func(p float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		return xs[min(len(xs)-1, int(p*float64(len(xs))))]
	}
	fmt.Fprintf(&b, "\n- **Segments.** %d customers are put in the project by COPY (%.2f s, the reference), a tenth of them gold; "+
		"the project then holds %d customers (with those the customers section imported, all gold in Oslo, when it ran). An "+
		"auto-update segment (`metadata.tier` is gold and `address.city` is Oslo) is created and its `initial_sync_status` polled "+
		"every 20 ms until DONE: the evaluation of its filter over every customer, in the asynchronous phase. Then %d customers "+
		"are updated one after the other into it (`PUT /v1/customers/{id}`), each timed from the request until "+
		"`GET /v1/customers/{id}/segments`, polled every 10 ms, lists the segment.\n\n", r.customers, r.copySecs, r.inProject, len(r.updates))
	fmt.Fprintf(&b, "| measure | Tally | reference |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| evaluate a filter segment over the project's %d customers (%d members) until DONE | %.2f s | COPY of %d customers %.2f s |\n",
		r.inProject, r.members, r.syncSecs, r.customers, r.copySecs)
	fmt.Fprintf(&b, "| a customer's update seen in its segments, p50 / p99 | %.0f ms / %.0f ms | |\n", q(0.5), q(0.99))
	v := "not measured: fewer customers (-segment-customers)"
	if r.customers == 1_000_000 {
		v = verdict(r.syncSecs <= 30)
	}
	fmt.Fprintf(&b, "\n| goal | target | measured | |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| auto-update segment of 1,000,000 customers evaluated | ≤ 30 s | %.2f s (%d customers) | %s |\n", r.syncSecs, r.inProject, v)
	fmt.Fprintf(&b, "| a single customer update reflected in its segments, p99 | ≤ 1 s | %.0f ms | %s |\n", q(0.99), verdict(len(xs) > 0 && q(0.99) <= 1000))
	return b.String()
}
