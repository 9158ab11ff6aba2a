package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/db"
)

// vouchersCount is a campaign's vouchers_count as the API reads it.
func vouchersCount(a stacktest.API, path string) int64 {
	a.T.Helper()
	return num(a.OK("GET", path, nil)["vouchers_count"])
}

func num(v any) int64 { return int64(v.(float64)) }

// Every writer that adds vouchers to one campaign at once (single creates,
// publications that make the voucher they give, generation requests of
// 30 more each) and cards to one program (members joining an AUTO_UPDATE
// program) leaves vouchers_count exactly the vouchers and cards there
// are: the counter rows each adds to, at random, sum to what was made.
func TestVouchersCountIsExactUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	pool := a.E.Stack.Regional["api"].Pool()
	campID := discountCampaign(a, "Counted", 0)["id"].(string)
	progID := a.Campaign("Counted program", map[string]any{"vouchers_count": 0})["id"].(string)

	const writers, each = 8, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var actions []string
	fail := func(what string, r stacktest.Resp) {
		t.Errorf("%s: %d %s", what, r.Status, r.Body)
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if r := a.Do("POST", "/v1/vouchers", map[string]any{"campaign_id": campID}); r.Status != 200 {
					fail("a single create", r)
				}
				if r := a.Do("POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Counted"},
					"customer": map[string]any{"source_id": fmt.Sprintf("pub-%d-%d", w, i)}}); r.Status != 200 {
					fail("a publication", r)
				}
				if r := a.Do("POST", "/v1/loyalties/"+progID+"/members", map[string]any{
					"customer": map[string]any{"source_id": fmt.Sprintf("mem-%d-%d", w, i)}}); r.Status != 200 {
					fail("a member", r)
				}
			}
			r := a.Do("POST", "/v1/campaigns/"+campID+"/vouchers?vouchers_count=30", nil)
			if r.Status != 202 {
				fail("a generation", r)
				return
			}
			mu.Lock()
			actions = append(actions, r.JSON(t)["async_action_id"].(string))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, id := range actions {
		a.WaitAction(id)
	}
	count := func(sql, id string) int64 {
		var n int64
		if err := pool.QueryRow(ctx, sql, a.P.ID, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	vouchers := count(`SELECT count(*) FROM vouchers WHERE project_id = $1 AND campaign_id = $2`, campID)
	held := count(`SELECT count(*) FROM vouchers WHERE project_id = $1 AND campaign_id = $2 AND holder_id IS NOT NULL`, campID)
	// The singles and the generations made what they said; each
	// publication took a free voucher or made one.
	if minimum := int64(writers*each + writers*30); vouchers < minimum || vouchers > minimum+writers*each || held != writers*each {
		t.Fatalf("%d vouchers, %d held: want %d to %d, %d held", vouchers, held, minimum, minimum+writers*each, writers*each)
	}
	if got := vouchersCount(a, "/v1/campaigns/"+campID); got != vouchers {
		t.Fatalf("vouchers_count %d, but the campaign has %d vouchers", got, vouchers)
	}
	if l := a.OK("GET", "/v1/campaigns?limit=100", nil); len(l["campaigns"].([]any)) != 2 {
		t.Fatalf("list: %v", l)
	} else {
		for _, c := range l["campaigns"].([]any) {
			c := c.(map[string]any)
			if c["id"] == campID && num(c["vouchers_count"]) != vouchers {
				t.Fatalf("listed vouchers_count %v, want %d", c["vouchers_count"], vouchers)
			}
		}
	}
	cards := count(`SELECT count(*) FROM loyalty_cards WHERE project_id = $1 AND campaign_id = $2`, progID)
	if got := vouchersCount(a, "/v1/loyalties/"+progID); cards != writers*each || got != cards {
		t.Fatalf("program: vouchers_count %d, %d cards, want %d", got, cards, writers*each)
	}
	// The additions spread over the counter rows.
	if shards := count(`SELECT count(*) FROM campaign_voucher_counts WHERE project_id = $1 AND campaign_id = $2`, campID); shards < 2 {
		t.Fatalf("every addition went to %d counter row", shards)
	}
}

// A writer that adds to a campaign's vouchers_count does not wait on the
// campaign's row, nor on another writer: with the row locked FOR UPDATE by
// another transaction (an update of the campaign, say), a publication that
// makes its voucher and a member joining an AUTO_UPDATE program (which
// makes their card) answer before a lock wait could even time out; with
// the row share-locked as another writer adding vouchers holds it, a
// single create does too. Each used to update (or lock FOR UPDATE) the
// campaign's row, and took turns on it.
func TestAddingToVouchersCountTakesNoTurnOnTheCampaign(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	ctx := context.Background()
	pool := a.E.Stack.Regional["api"].Pool()
	campID := discountCampaign(a, "Locked", 0)["id"].(string)
	progID := a.Campaign("Locked program", map[string]any{"vouchers_count": 0})["id"].(string)

	hold := func(lock string, ids ...string) pgx.Tx {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM campaigns WHERE project_id = $1 AND id = ANY($2::TEXT[]) `+lock, a.P.ID, ids); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	timed := func(what, method, path string, body any) {
		t.Helper()
		began := time.Now()
		r := a.Do(method, path, body)
		if took := time.Since(began); r.Status != 200 || took >= db.LockTimeout {
			t.Errorf("%s while the campaign's row is locked: %d after %s (the lock wait's limit is %s) %s",
				what, r.Status, took.Round(time.Millisecond), db.LockTimeout, r.Body)
		}
	}

	tx := hold("FOR UPDATE", campID, progID)
	for i := range 3 {
		timed("a publication making its voucher", "POST", "/v1/publications", map[string]any{"campaign": map[string]any{"name": "Locked"},
			"customer": map[string]any{"source_id": fmt.Sprintf("p%d", i)}})
		timed("a member joining", "POST", "/v1/loyalties/"+progID+"/members", map[string]any{
			"customer": map[string]any{"source_id": fmt.Sprintf("m%d", i)}})
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// Another writer's hold: a single create takes the campaign's row FOR
	// SHARE, as does an import's chunk.
	tx = hold("FOR SHARE", campID)
	for range 3 {
		timed("a single create", "POST", "/v1/vouchers", map[string]any{"campaign_id": campID})
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		return
	}
	if got := vouchersCount(a, "/v1/campaigns/"+campID); got != 6 {
		t.Fatalf("vouchers_count %d, want 6 (3 publications, 3 singles)", got)
	}
	if got := vouchersCount(a, "/v1/loyalties/"+progID); got != 3 {
		t.Fatalf("program vouchers_count %d, want 3", got)
	}
}
