package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/vouchers"
)

// hotRun redeems code tries times, slots at once, each try its own
// customer and order; after each acceptance, then(accepted so far) may
// act (roll it back: it answers true). It answers accepted, rolled back
// and refused.
func hotRun(t *testing.T, a stacktest.API, code string, tries, slots int, then func(n int, parentID string) bool) (int, int, int) {
	var mu sync.Mutex
	accepted, refused, rolled := 0, 0, 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, slots)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := redeemRetrying(t, a, "/v1/redemptions", map[string]any{"redeemables": redeemables(code),
				"order":    map[string]any{"source_id": fmt.Sprintf("%s-order-%d", code, i), "amount": 1000},
				"customer": map[string]any{"source_id": fmt.Sprintf("%s-%d", code, i)}})
			switch {
			case r.Status == 200:
				mu.Lock()
				accepted++
				n := accepted
				mu.Unlock()
				if then != nil && then(n, r.JSON(t)["parent_redemption"].(map[string]any)["id"].(string)) {
					mu.Lock()
					rolled++
					mu.Unlock()
				}
			case r.Status == 400 && r.JSON(t)["key"] == "quantity_exceeded":
				mu.Lock()
				refused++
				mu.Unlock()
			default:
				t.Errorf("redemption %d of %s: %d %s", i, code, r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	return accepted, rolled, refused
}

func redeemedOf(t *testing.T, a stacktest.API, code string) int {
	t.Helper()
	v := a.OK("GET", "/v1/vouchers/"+code, nil)
	return int(stacktest.Num(v["redemption"].(map[string]any)["redeemed_quantity"]))
}

// A hot code counted on counter shards stays exact when its quantity is
// lowered while redemptions and rollbacks run: the shards' unused quotas
// are taken back under the voucher's lock, so none is spent past the new
// quantity, and exactly the new quantity stands; the voucher reads it
// back, the shards' counts summed with its row's.
func TestAHotCodeCountsExactlyThroughAQuantityChange(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	const first, second, tries, rollbacks = 400, 60, 200, 5
	a.Voucher("HOTCHANGE", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
		"redemption": map[string]any{"quantity": first}})
	var once sync.Once
	var mu sync.Mutex
	rolled := 0
	accepted, back, refused := hotRun(t, a, "HOTCHANGE", tries, 10, func(n int, id string) bool {
		if n >= 20 {
			once.Do(func() {
				a.OK("PUT", "/v1/vouchers/HOTCHANGE", map[string]any{"redemption": map[string]any{"quantity": second}})
			})
		}
		mu.Lock()
		roll := n%7 == 0 && rolled < rollbacks
		if roll {
			rolled++
		}
		mu.Unlock()
		if roll {
			if rb := redeemRetrying(t, a, "/v1/redemptions/"+id+"/rollbacks", map[string]any{"reason": "returned"}); rb.Status != 200 {
				t.Errorf("rollback %s: %d %s", id, rb.Status, rb.Body)
			}
		}
		return roll
	})
	if accepted-back != second || accepted+refused != tries {
		t.Fatalf("%d accepted, %d rolled back, %d refused of %d tries, the quantity lowered from %d to %d",
			accepted, back, refused, tries, first, second)
	}
	if got := redeemedOf(t, a, "HOTCHANGE"); got != second {
		t.Fatalf("redeemed_quantity %d, want %d", got, second)
	}
}

// A quantity large enough to be spread over every shard, exhausted by
// more tries than it allows: shards run dry unevenly (each redeemer takes
// the first with room from a random one), their quotas are granted again
// and, at the end, taken back, and exactly the quantity is accepted.
func TestAHotCodeOnShardsAcceptsExactlyItsQuantity(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	const n, tries = 150, 220
	a.Voucher("HOTSHARDS", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
		"redemption": map[string]any{"quantity": n}})
	accepted, _, refused := hotRun(t, a, "HOTSHARDS", tries, 12, nil)
	if accepted != n || refused != tries-n {
		t.Fatalf("%d accepted, %d refused of %d tries at a quantity of %d", accepted, refused, tries, n)
	}
	if got := redeemedOf(t, a, "HOTSHARDS"); got != n {
		t.Fatalf("redeemed_quantity %d, want %d", got, n)
	}
	// The voucher's validation reads the count summed too.
	r := a.Do("POST", "/v1/validations", map[string]any{"redeemables": redeemables("HOTSHARDS"),
		"order": map[string]any{"amount": 1000}})
	if r.Status != 200 || r.JSON(t)["valid"] != false {
		t.Fatalf("validation of a used up code: %d %s", r.Status, r.Body)
	}
}

// Once a code's count is on counter shards, a redemption neither waits
// for the voucher's row nor for a shard another redemption holds: with
// the row and all but one shard locked by a transaction in flight, a
// redemption completes at once. Counted on the voucher's row (or on one
// shard chosen blindly), it waited for that transaction.
func TestRedeemersOfOneCodeDoNotWaitOnItsRowOrEachOthersShards(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	a.Voucher("HOTROW", map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100},
		"redemption": map[string]any{"quantity": 10_000}})
	// The first redemption grants the shards their quotas.
	a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": redeemables("HOTROW"),
		"order": map[string]any{"source_id": "row-0", "amount": 1000}, "customer": map[string]any{"source_id": "row-0"}})
	ctx := context.Background()
	tx, err := a.E.Stack.Regional["api"].Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var id string
	if err := tx.QueryRow(ctx, `SELECT id FROM vouchers WHERE project_id = $1 AND code = 'HOTROW' FOR UPDATE`, a.P.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(ctx, `UPDATE voucher_count_shards SET used = used WHERE project_id = $1 AND voucher_id = $2 AND shard > 0 AND used < quota`, a.P.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != vouchers.Shards-1 {
		t.Fatalf("%d shards with room locked, want %d", tag.RowsAffected(), vouchers.Shards-1)
	}
	for i := 1; i <= 5; i++ {
		var r stacktest.Resp
		// The transaction holds the row and the shards until the loop
		// ends: a redemption that waited for them would not finish within
		// the bound (generous for a loaded machine), or would finish with
		// an error once its lock waits ran out.
		if ok, _ := stacktest.Within(8*time.Second, func() {
			r = a.Do("POST", "/v1/redemptions", map[string]any{"redeemables": redeemables("HOTROW"),
				"order":    map[string]any{"source_id": fmt.Sprintf("row-%d", i), "amount": 1000},
				"customer": map[string]any{"source_id": fmt.Sprintf("row-%d", i)}})
		}); !ok {
			_ = tx.Rollback(ctx)
			t.Fatalf("redemption %d waited for the voucher's row or a shard held by another transaction", i)
		}
		if r.Status != 200 {
			t.Fatalf("redemption %d: %d %s", i, r.Status, r.Body)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := redeemedOf(t, a, "HOTROW"); got != 6 {
		t.Fatalf("redeemed_quantity %d, want 6", got)
	}
}
