package redemptions

import (
	"testing"

	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/tiers"
)

// What a reward costs a card, without a database.
func TestRewardPrice(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	mug := rewards.Reward{ID: "rew_mug", Type: "MATERIAL"}
	coin := rewards.Reward{ID: "rew_coin", Type: rewards.Coin}
	coin.Attrs.Parameters.Coin = &rewards.CoinRatio{ExchangeRatio: 1, PointsRatio: 10} // 10 points pay 1.00
	order := func(amount int64) *orders.View { return &orders.View{ID: "ord_1", Amount: n(amount)} }
	for _, c := range []struct {
		name       string
		w          rewards.Reward
		holder     *tiers.Tier
		asked      *int64
		order      *orders.View
		paidBefore int64
		points     int64
		amount     int64 // -1: none
		fails      bool
	}{
		{"a material reward at its assignment's price", mug, nil, nil, nil, 0, 100, -1, false},
		{"…mapped for the holder's tier", mug, &tiers.Tier{Attrs: tiers.TierAttrs{Rewards: map[string]tiers.Mapping{"rew_mug": {Type: "CUSTOM", Points: n(40)}}}}, nil, nil, 0, 40, -1, false},
		{"…with points asked", mug, nil, n(5), nil, 0, 0, 0, true},
		{"coin: what the order's amount costs", coin, nil, nil, order(2550), 0, 255, 2550, false},
		{"coin: part of it", coin, nil, n(100), order(2550), 0, 100, 1000, false},
		{"coin: less what earlier redemptions paid", coin, nil, nil, order(2550), 2000, 55, 550, false},
		{"coin: an order already paid", coin, nil, nil, order(2550), 2550, 0, 0, true},
		{"coin: more points than due", coin, nil, n(256), order(2550), 0, 0, 0, true},
		{"coin: no order", coin, nil, nil, nil, 0, 0, 0, true},
		{"coin: at least one point", coin, nil, nil, order(1), 0, 1, 1, false},
	} {
		pts, amount, err := price(c.w, Assignment{Points: n(100)}, c.holder, c.asked, c.order, c.paidBefore)
		if c.fails {
			if err == nil {
				t.Errorf("%s: %d points, want an error", c.name, pts)
			}
			continue
		}
		gotAmount := int64(-1)
		if amount != nil {
			gotAmount = *amount
		}
		if err != nil || pts != c.points || gotAmount != c.amount {
			t.Errorf("%s: %d points for %d (%v), want %d for %d", c.name, pts, gotAmount, err, c.points, c.amount)
		}
	}
}
