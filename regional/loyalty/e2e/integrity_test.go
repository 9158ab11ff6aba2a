package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// 16 clients add, remove and transfer points among 50 cards for 10 seconds
// through the router; then every card's balance is the sum of its
// transactions and of its point buckets, none is negative, the points are
// conserved, and every operation that succeeded left its transactions.
func TestLedgerIntegrityUnderConcurrentOperations(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	e := stacktest.Start(t, stacktest.Options{})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}
	// Transfers give points expiring by the campaign's rules; additions
	// choose among three dates and none, so cards hold several buckets.
	campID := a.Campaign("Integrity", map[string]any{"voucher": map[string]any{"type": "LOYALTY_CARD",
		"loyalty_card": map[string]any{"points": 0, "expiration_rules": map[string]any{"period_type": "MONTH", "period_value": 6}}}})["id"].(string)
	dates := []string{"", time.Now().AddDate(0, 1, 0).Format(time.DateOnly), time.Now().AddDate(0, 3, 0).Format(time.DateOnly),
		time.Now().AddDate(1, 0, 0).Format(time.DateOnly)}
	codes := make([]string, 50)
	for i := range codes {
		codes[i] = a.Member(campID, fmt.Sprintf("m%02d", i))["code"].(string)
		a.OK("POST", "/v1/loyalties/members/"+codes[i]+"/balance", map[string]any{"points": 100})
	}
	var added, removed, txCount, ops, refused atomic.Int64
	added.Store(5000)
	txCount.Store(50)
	post := func(path string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", stacktest.URL("api", path), bytes.NewReader(b))
		req.Header = a.P.Header()
		req.Header.Set("Content-Type", "application/json")
		res, err := e.Client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		return res.StatusCode, out, err
	}
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c := codes[rand.IntN(len(codes))]
				var status int
				var body []byte
				var err error
				n := int64(1 + rand.IntN(60))
				kind := rand.IntN(3)
				switch kind {
				case 0:
					add := map[string]any{"points": n, "expiration_type": "NON_EXPIRING"}
					if d := dates[rand.IntN(len(dates))]; d != "" {
						add["expiration_type"], add["expiration_date"] = "CUSTOM_DATE", d
					}
					status, body, err = post("/v1/loyalties/members/"+c+"/balance", add)
				case 1:
					status, body, err = post("/v1/loyalties/members/"+c+"/balance", map[string]any{"points": -n})
				default:
					d1, d2 := codes[rand.IntN(len(codes))], codes[rand.IntN(len(codes))]
					if d1 == c || d2 == c {
						continue
					}
					status, body, err = post("/v1/loyalties/"+campID+"/members/"+c+"/transfers",
						[]map[string]any{{"code": d1, "points": n}, {"code": d2, "points": n/2 + 1}})
				}
				if err != nil {
					errs <- err.Error()
					return
				}
				ops.Add(1)
				switch {
				case status == 200:
					switch kind {
					case 0:
						added.Add(n)
						txCount.Add(1)
					case 1:
						removed.Add(n)
						txCount.Add(1)
					default:
						txCount.Add(4)
					}
				case status == 400 && bytes.Contains(body, []byte(`"loyalty_card_points_exceeded"`)):
					refused.Add(1)
				default:
					errs <- fmt.Sprintf("%d %s", status, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	t.Logf("%d operations, %d refused for want of points", ops.Load(), refused.Load())

	pool := e.Stack.Regional["api"].Pool()
	var balances, cards, bad int64
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(sum(balance), 0), count(*) FROM loyalty_cards WHERE project_id = $1`,
		a.P.ID).Scan(&balances, &cards); err != nil {
		t.Fatal(err)
	}
	if want := added.Load() - removed.Load(); balances != want {
		t.Fatalf("points not conserved: cards hold %d, %d added and %d removed", balances, added.Load(), removed.Load())
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM loyalty_cards c WHERE c.project_id = $1 AND (c.balance < 0
		OR c.balance <> (SELECT coalesce(sum(delta), 0) FROM loyalty_transactions t WHERE t.project_id = c.project_id AND t.card_id = c.id)
		OR c.balance <> (SELECT coalesce(sum(points), 0) FROM loyalty_point_buckets b WHERE b.project_id = c.project_id AND b.card_id = c.id)
		OR c.balance <> c.points - c.subtracted_points - c.expired_points - c.redeemed_points)`, a.P.ID).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d cards whose balance is not the sum of their transactions and buckets, or negative", bad)
	}
	// Each card's next expiration is its soonest-expiring bucket, and a card
	// has a bucket per date, not per addition.
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM loyalty_cards c WHERE c.project_id = $1 AND (
		c.next_expiration_date IS DISTINCT FROM (SELECT min(expires_on) FROM loyalty_point_buckets b
			WHERE b.project_id = c.project_id AND b.card_id = c.id AND b.points > 0)
		OR c.next_expiration_points IS DISTINCT FROM (SELECT sum(points) FROM loyalty_point_buckets b
			WHERE b.project_id = c.project_id AND b.card_id = c.id AND b.points > 0 AND b.expires_on = c.next_expiration_date))`,
		a.P.ID).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d cards whose next expiration is not their soonest bucket's", bad)
	}
	var most int64
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM loyalty_point_buckets
		WHERE project_id = $1 GROUP BY card_id) x`, a.P.ID).Scan(&most); err != nil {
		t.Fatal(err)
	}
	if most > int64(len(dates)+1) {
		t.Fatalf("a card has %d buckets: one per addition, not per date", most)
	}
	var txs int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM loyalty_transactions WHERE project_id = $1`, a.P.ID).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if txs != txCount.Load() {
		t.Fatalf("%d transactions for %d written", txs, txCount.Load())
	}
	if ops.Load() < 500 {
		t.Fatalf("only %d operations in 10 s", ops.Load())
	}
}
