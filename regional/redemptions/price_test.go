package redemptions

import (
	"errors"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/tiers"
)

func n(v int64) *int64 { return &v }

func coinReward(exchange float64, points int64) rewards.Reward {
	w := rewards.Reward{ID: "rew_coin", Type: rewards.Coin}
	w.Attrs.Parameters.Coin = &rewards.CoinRatio{ExchangeRatio: exchange, PointsRatio: points}
	return w
}

// errKey is the key of an API error, "" for none.
func errKey(err error) string {
	var e *apierr.Error
	if errors.As(err, &e) {
		return e.Key
	}
	if err != nil {
		return "(not an API error: " + err.Error() + ")"
	}
	return ""
}

// What a reward costs a card through a loyalty redemption, without a
// database.
func TestRewardPrice(t *testing.T) {
	mug := rewards.Reward{ID: "rew_mug", Type: rewards.Material}
	coin := coinReward(1, 10)   // 10 points pay 1.00: 0.1 point a cent
	dear := coinReward(2, 1)    // 1 point pays 2.00: 0.005 point a cent
	cheap := coinReward(0.5, 4) // 4 points pay 0.50: 0.08 point a cent
	order := func(amount int64) *orders.View { return &orders.View{ID: "ord_1", Amount: n(amount)} }
	discounted := &orders.View{ID: "ord_2", Amount: n(3000), TotalAmount: n(2000)}
	tier := func(m tiers.Mapping) *tiers.Tier {
		return &tiers.Tier{Attrs: tiers.TierAttrs{Rewards: map[string]tiers.Mapping{"rew_mug": m}}}
	}
	half, third := 0.5, 1.0/3
	for _, c := range []struct {
		name       string
		w          rewards.Reward
		holder     *tiers.Tier
		asked      *int64
		order      *orders.View
		paidBefore int64
		points     int64
		amount     int64  // -1: none
		key        string // the refusal's, "" when priced
	}{
		{"a material reward at its assignment's price", mug, nil, nil, nil, 0, 100, -1, ""},
		{"…a custom price for the holder's tier", mug, tier(tiers.Mapping{Type: "CUSTOM", Points: n(40)}), nil, nil, 0, 40, -1, ""},
		{"…a tier's multiplier", mug, tier(tiers.Mapping{Type: "MULTIPLY", Multiplier: &half}), nil, nil, 0, 50, -1, ""},
		{"…a multiplier's fraction of a point is dropped", mug, tier(tiers.Mapping{Type: "MULTIPLY", Multiplier: &third}), nil, nil, 0, 33, -1, ""},
		{"…a tier mapping another reward only", mug, &tiers.Tier{Attrs: tiers.TierAttrs{Rewards: map[string]tiers.Mapping{
			"rew_other": {Type: "CUSTOM", Points: n(1)}}}}, nil, nil, 0, 100, -1, ""},
		{"…with points asked", mug, nil, n(5), nil, 0, 0, 0, "invalid_payload"},
		{"coin: what the order's amount costs", coin, nil, nil, order(2550), 0, 255, 2550, ""},
		{"coin: the order's total after its discount, not its amount", coin, nil, nil, discounted, 0, 200, 2000, ""},
		{"coin: part of it", coin, nil, n(100), order(2550), 0, 100, 1000, ""},
		{"coin: less what earlier redemptions paid", coin, nil, nil, order(2550), 2000, 55, 550, ""},
		{"coin: a part of a point due is a whole point", coin, nil, nil, order(2555), 0, 256, 2555, ""},
		{"coin: what the points pay is capped at what is due", dear, nil, nil, order(1001), 0, 6, 1001, ""},
		{"coin: points asked pay their worth, rounded down", dear, nil, n(5), order(1001), 0, 5, 1000, ""},
		{"coin: a ratio below a point a unit", cheap, nil, nil, order(1234), 0, 99, 1234, ""},
		{"coin: at least one point", coin, nil, nil, order(1), 0, 1, 1, ""},
		{"coin: an order already paid", coin, nil, nil, order(2550), 2550, 0, 0, "invalid_payload"},
		{"coin: more points than due", coin, nil, n(256), order(2550), 0, 0, 0, "invalid_payload"},
		{"coin: no points asked", coin, nil, n(0), order(2550), 0, 0, 0, "invalid_payload"},
		{"coin: no order", coin, nil, nil, nil, 0, 0, 0, "invalid_payload"},
		{"coin: an order without an amount", coin, nil, nil, &orders.View{ID: "ord_3"}, 0, 0, 0, "invalid_payload"},
		{"coin: an order of nothing", coin, nil, nil, order(0), 0, 0, 0, "invalid_payload"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pts, amount, err := price(c.w, Assignment{Points: n(100)}, c.holder, c.asked, c.order, c.paidBefore)
			if c.key != "" {
				if k := errKey(err); k != c.key {
					t.Fatalf("%d points (%v), want a %s refusal", pts, err, c.key)
				}
				return
			}
			gotAmount := int64(-1)
			if amount != nil {
				gotAmount = *amount
			}
			if err != nil || pts != c.points || gotAmount != c.amount {
				t.Fatalf("%d points for %d (%v), want %d for %d", pts, gotAmount, err, c.points, c.amount)
			}
		})
	}
}

// payment is a card of balance points paying with w, offered at 100 points.
func payment(w rewards.Reward, balance int64, asked *int64, ts ...tiers.Tier) *CardPayment {
	p := &CardPayment{RewardID: w.ID, Reward: w, HasReward: true, Assigned: true, Assignment: Assignment{Points: n(100)}, Asked: asked}
	p.Card.Code, p.Card.Balance, p.Card.Campaign.Tiers = "LC-1", balance, ts
	return p
}

// What a card pays inside a stacked redemption (the engine's), without a
// database: a COIN reward pays up to what the order still owes.
func TestACardPaysWithACoinRewardUpToWhatIsDue(t *testing.T) {
	for _, c := range []struct {
		name          string
		p             *CardPayment
		due           int64
		points, paid  int64
		wantCheck     string
		cardPaysAtAll bool
	}{
		{"all that is due", payment(coinReward(1, 10), 1000, nil), 2550, 255, 2550, "", true},
		{"a part of a point due is a whole point", payment(coinReward(1, 10), 1000, nil), 2555, 256, 2555, "", true},
		{"no more than the card holds", payment(coinReward(1, 10), 100, nil), 2550, 100, 1000, "", true},
		{"the points asked", payment(coinReward(1, 10), 1000, n(30)), 2550, 30, 300, "", true},
		{"the points asked, never past what is due", payment(coinReward(1, 10), 1000, n(900)), 2550, 255, 2550, "", true},
		{"what they pay, capped at what is due", payment(coinReward(2, 1), 1000, nil), 1001, 6, 1001, "", true},
		{"nothing due: nothing taken", payment(coinReward(1, 10), 1000, nil), 0, 0, 0, "", false},
		{"an empty card cannot pay", payment(coinReward(1, 10), 0, nil), 2550, 0, 0, "loyalty_card_points_exceeded", false},
		{"nor with fewer points than asked", payment(coinReward(1, 10), 20, n(30)), 2550, 20, 200, "loyalty_card_points_exceeded", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := errKey(c.p.Check()); got != c.wantCheck {
				t.Fatalf("check %q, want %q", got, c.wantCheck)
			}
			if c.wantCheck != "" {
				return
			}
			pts, paid := c.p.Coin(c.due)
			if pts != c.points || paid != c.paid || !c.p.IsCoin() {
				t.Fatalf("%d points paying %d, want %d paying %d", pts, paid, c.points, c.paid)
			}
		})
	}
}

// What a reward other than COIN costs a card inside a stacked redemption,
// and why a card cannot pay.
func TestACardPaysAMaterialRewardsPrice(t *testing.T) {
	mug := rewards.Reward{ID: "rew_mug", Type: rewards.Material}
	gold := tiers.Tier{ID: "ltr_gold", From: 500, Attrs: tiers.TierAttrs{Rewards: map[string]tiers.Mapping{"rew_mug": {Type: "CUSTOM", Points: n(60)}}}}
	out := mug
	out.Stock, out.Redeemed = n(2), 2
	left := mug
	left.Stock, left.Redeemed = n(2), 1
	for _, c := range []struct {
		name  string
		p     *CardPayment
		price int64
		key   string
	}{
		{"the assignment's price", payment(mug, 100, nil), 100, ""},
		{"the holder's tier's price", payment(mug, 500, nil, gold), 60, ""},
		{"a tier the holder is not in", payment(mug, 499, nil, gold), 100, ""},
		{"a unit left in stock", payment(left, 100, nil), 100, ""},
		{"too few points", payment(mug, 99, nil), 100, "loyalty_card_points_exceeded"},
		{"points asked of a priced reward", payment(mug, 1000, n(5)), 100, "invalid_payload"},
		{"out of stock", payment(out, 1000, nil), 100, "quantity_exceeded"},
		{"a reward that is not there", func() *CardPayment { p := payment(mug, 1000, nil); p.HasReward = false; return p }(), 100, "not_found"},
		{"a reward the campaign does not offer", func() *CardPayment { p := payment(mug, 1000, nil); p.Assigned = false; return p }(), 100,
			"reward_not_assigned"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := errKey(c.p.Check()); got != c.key {
				t.Fatalf("check %q, want %q", got, c.key)
			}
			if c.p.Price() != c.price || c.p.IsCoin() {
				t.Fatalf("price %d, want %d", c.p.Price(), c.price)
			}
		})
	}
}

// What an assignment's price may be for each kind of reward.
func TestAnAssignmentIsPricedInPointsExceptACoinReward(t *testing.T) {
	for _, c := range []struct {
		name   string
		typ    string
		points *int64
		ok     bool
	}{
		{"a material reward at one point", rewards.Material, n(1), true},
		{"a material reward at the most", rewards.Material, n(1_000_000_000), true},
		{"a material reward without a price", rewards.Material, nil, false},
		{"a material reward for nothing", rewards.Material, n(0), false},
		{"a material reward past the most", rewards.Material, n(1_000_000_001), false},
		{"a coin reward without a price", rewards.Coin, nil, true},
		{"a coin reward with a price", rewards.Coin, n(5), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkPrice("[0].", c.typ, c.points)
			if c.ok != (err == nil) {
				t.Fatalf("%v, want accepted %v", err, c.ok)
			}
			if err != nil && (errKey(err) != "invalid_payload" || !strings.Contains(err.(*apierr.Error).Details, "[0].parameters.loyalty.points")) {
				t.Fatalf("%v does not name the field", err)
			}
		})
	}
}
