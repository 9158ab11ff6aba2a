package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/rewards"
)

// inFlight is a buyer of a reward caught between its count and its
// commit, as a redemption is while its commit's WAL is flushed: it holds
// what Count holds (the reward's row share-locked while it has no stock,
// and one unit counted), uncommitted, until commit.
type inFlight struct {
	tx pgx.Tx
}

func buying(t *testing.T, a stacktest.API, rewardID string) inFlight {
	t.Helper()
	ctx := context.Background()
	tx, err := a.E.Stack.Regional["api"].Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	var c rewards.Count
	b := &pgx.Batch{}
	rewards.QueueCount(b, a.P.ID, rewardID, &c)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	b = &pgx.Batch{}
	c.Queue(b, a.P.ID, +1)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	return inFlight{tx}
}

// A reward without a stock no longer makes its buyers take turns on its
// row: a redemption completes while another buyer of the same reward is
// in flight (its row's update held to its commit stopped every other
// buyer before). Setting a stock waits for the buyers in flight and counts
// their units against it: of a stock of 3 with 2 redeemed, one of them by
// the buyer that was in flight, one more unit is given and the next is
// refused.
func TestBuyersOfARewardWithoutStockDoNotWaitOnEachOther(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	campID := a.Campaign("Buyers", nil)["id"].(string)
	rewardID := a.OK("POST", "/v1/rewards", map[string]any{"name": "Sticker",
		"parameters": map[string]any{"product": map[string]any{"id": "prod_sticker"}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": rewardID, "parameters": map[string]any{"loyalty": map[string]any{"points": 10}}})
	code := a.Member(campID, "ann")["code"].(string)
	a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1000})
	redeem := func() stacktest.Resp {
		return a.Do("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": rewardID}})
	}

	other := buying(t, a, rewardID)
	var r stacktest.Resp
	ok, done := stacktest.Within(5*time.Second, func() { r = redeem() })
	if !ok {
		_ = other.tx.Rollback(context.Background())
		<-done
		t.Fatalf("a redemption waited for another buyer of the reward in flight")
	}
	if r.Status != 200 {
		t.Fatalf("redemption: %d %s", r.Status, r.Body)
	}

	// The stock is set while the other buyer is still in flight: it
	// waits for that buyer's commit and then counts its unit.
	var put stacktest.Resp
	ok, done = stacktest.Within(300*time.Millisecond, func() { put = a.Do("PUT", "/v1/rewards/"+rewardID, map[string]any{"stock": 3}) })
	if ok {
		t.Fatalf("setting the stock did not wait for the buyer in flight: %d %s", put.Status, put.Body)
	}
	if err := other.tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	if put.Status != 200 || stacktest.Num(put.JSON(t)["redeemed"]) != 2 {
		t.Fatalf("stock set: %d %s", put.Status, put.Body)
	}
	if r := redeem(); r.Status != 200 {
		t.Fatalf("the third unit: %d %s", r.Status, r.Body)
	}
	a.Fails("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": rewardID}}, 400, "quantity_exceeded")
	if w := a.OK("GET", "/v1/rewards/"+rewardID, nil); stacktest.Num(w["redeemed"]) != 3 || stacktest.Num(w["stock"]) != 3 {
		t.Fatalf("reward: %v", w)
	}
	// A stock refuses one below what is redeemed, shards included.
	a.Fails("PUT", "/v1/rewards/"+rewardID, map[string]any{"stock": 2}, 400, "invalid_payload")
}

// Many buyers of a reward without a stock, alone and in stacked
// redemptions, some rolled back, leave its redeemed exactly the standing
// redemptions; taking its stock off and on again keeps the count.
func TestARewardWithoutStockCountsEveryStandingRedemption(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	campID := a.Campaign("Many", nil)["id"].(string)
	rewardID := a.OK("POST", "/v1/rewards", map[string]any{"name": "Badge",
		"parameters": map[string]any{"product": map[string]any{"id": "prod_badge"}}})["id"].(string)
	a.OK("POST", "/v1/loyalties/"+campID+"/rewards", map[string]any{"reward": rewardID, "parameters": map[string]any{"loyalty": map[string]any{"points": 10}}})
	var codes []string
	for i := range 4 {
		code := a.Member(campID, fmt.Sprintf("m%d", i))["code"].(string)
		a.OK("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1000})
		codes = append(codes, code)
	}
	var mu sync.Mutex
	var single, stacked []string
	var wg sync.WaitGroup
	slots := make(chan struct{}, 6) // within the test project's share of the database
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			code := codes[i%len(codes)]
			if i%2 == 0 {
				r := a.OK("POST", "/v1/loyalties/members/"+code+"/redemption", map[string]any{"reward": map[string]any{"id": rewardID}})
				mu.Lock()
				single = append(single, r["id"].(string))
				mu.Unlock()
				return
			}
			r := a.OK("POST", "/v1/redemptions", map[string]any{"redeemables": []any{
				map[string]any{"object": "voucher", "id": code, "reward": map[string]any{"id": rewardID}}}})
			mu.Lock()
			stacked = append(stacked, r["redemptions"].([]any)[0].(map[string]any)["id"].(string))
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Four of each kind rolled back, concurrently.
	for _, id := range append(single[:4:4], stacked[:4]...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.OK("POST", "/v1/redemptions/"+id+"/rollback", map[string]any{})
		}()
	}
	wg.Wait()
	if w := a.OK("GET", "/v1/rewards/"+rewardID, nil); stacktest.Num(w["redeemed"]) != 16 {
		t.Fatalf("24 redeemed, 8 rolled back: %v", w["redeemed"])
	}
	var shards int
	if err := a.E.Stack.Regional["api"].Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM reward_redemption_counts WHERE project_id = $1 AND reward_id = $2`, a.P.ID, rewardID).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	if shards == 0 {
		t.Fatalf("a reward without a stock counted in its row")
	}
	a.OK("PUT", "/v1/rewards/"+rewardID, map[string]any{"stock": 100})
	a.OK("POST", "/v1/redemptions/"+single[4]+"/rollback", map[string]any{})
	a.OK("PUT", "/v1/rewards/"+rewardID, map[string]any{"stock": nil})
	a.OK("POST", "/v1/loyalties/members/"+codes[0]+"/redemption", map[string]any{"reward": map[string]any{"id": rewardID}})
	a.OK("POST", "/v1/redemptions/"+stacked[4]+"/rollback", map[string]any{})
	if w := a.OK("GET", "/v1/rewards/"+rewardID, nil); stacktest.Num(w["redeemed"]) != 15 || w["stock"] != nil {
		t.Fatalf("after the stock came and went: %v", w)
	}
	if l := a.OK("GET", "/v1/rewards", nil); stacktest.Num(l["data"].([]any)[0].(map[string]any)["redeemed"]) != 15 {
		t.Fatalf("the list: %v", l)
	}
}
