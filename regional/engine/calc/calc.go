package calc

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/products"
	"github.com/tallyhq/tally/regional/redemptions"
)

// The order recalculation. Redeemables apply in turn, each to what the
// ones before it left: an order-level discount (APPLY_TO_ORDER, gift
// credits) to the order's remaining total, an item-level one to the
// admitted items' remaining amounts. Amounts are integer cents; a percent
// is exact (read as a decimal) and rounds half away from zero; a split
// across items (PROPORTIONALLY) gives each item its share rounded down and
// the cents left one by one to the largest remainders, ties to the earlier
// item, so the parts sum to the whole. No amount goes below zero: a
// discount is at most what remains.
//
//   AMOUNT   APPLY_TO_ORDER      min(amount_off, remaining total)
//            APPLY_TO_ITEMS      amount_off off each admitted item
//            …_BY_QUANTITY       amount_off off each unit of each admitted item
//            …_PROPORTIONALLY    amount_off split by the items' remaining amounts
//            …_PROPORTIONALLY_BY_QUANTITY  split by the items' quantities
//            aggregated_amount_limit caps the item-level total
//   PERCENT  percent_off of the remaining total (or of each admitted
//            item); amount_limit caps it
//   FIXED    the total (or each admitted item's unit price) becomes
//            fixed_amount when above it
//   UNIT     unit_off units of a product free: ADD_MISSING_ITEMS raises its
//            line to unit_off units (added at the line's or the
//            catalogue's price), ADD_NEW_ITEMS adds a line of unit_off;
//            ADD_MANY_ITEMS does each of its units
//   gift     the requested credits, or the balance, up to the remaining total
//   loyalty  a COIN reward: the points asked, or the balance, worth up to
//            the remaining total at the reward's ratio (points rounded up,
//            the amount they pay down); another reward: its price in
//            points, no discount

// applied is one redeemable's effect on the order.
type Effect struct {
	Order    *OrderView     // the order with this redeemable's discounts
	Result   map[string]any // the reference's result: discount or gift (read only: its discount is shared)
	Discount int64          // the amount it took off
	Credits  int64          // the gift credits it takes
	Points   int64          // the loyalty points it takes
	NoEffect bool
}

// line is an order item being recalculated.
type line struct {
	raw                map[string]any
	price, qty         int64
	initialQty         int64
	amount, initialAmt int64
	discount           int64 // item-level discounts so far
	added              bool  // a line a UNIT discount added
}

func (l *line) remaining() int64 { return max(0, l.amount-l.discount) }

// cart is the order being recalculated.
type cart struct {
	lines         []*line
	amount        int64 // the order's amount before discounts
	given         int64 // the request's own discount_amount
	orderDiscount int64 // order-level discounts applied
	o             *orders.Request
	initial       bool // percents of the initial amounts
}

func newCart(o *orders.Request) *cart {
	c := &cart{o: o}
	if o == nil {
		return c
	}
	var sum int64
	for _, it := range o.Items {
		l := &line{raw: it, price: jsonx.Int(it["price"]), qty: jsonx.Int(it["quantity"]), amount: jsonx.Int(it["amount"])}
		if l.amount == 0 && l.price > 0 {
			l.amount = l.price * max(l.qty, 1)
		}
		if l.price == 0 && l.qty > 0 {
			l.price = l.amount / l.qty
		}
		l.initialQty, l.initialAmt = l.qty, l.amount
		c.lines = append(c.lines, l)
		sum += l.amount
	}
	c.amount = sum
	if o.Amount != nil && (len(o.Items) == 0 || *o.Amount > sum) {
		c.amount = *o.Amount
	}
	if o.DiscountAmount != nil {
		c.given = *o.DiscountAmount
	}
	return c
}

func (c *cart) itemsDiscount() int64 {
	var n int64
	for _, l := range c.lines {
		n += l.discount
	}
	return n
}

func (c *cart) remaining() int64 {
	return max(0, c.amount-c.given-c.orderDiscount-c.itemsDiscount())
}

// admitted are the lines a redeemable may discount (nil: every line).
func (c *cart) admitted(lines []int) []*line {
	if lines == nil {
		return c.lines
	}
	out := make([]*line, 0, len(lines))
	for _, i := range lines {
		if i >= 0 && i < len(c.lines) {
			out = append(out, c.lines[i])
		}
	}
	return out
}

// discount is a stored discount object, its numbers read exactly.
type discount struct {
	Type                  string          `json:"type"`
	Effect                string          `json:"effect"`
	AmountOff             json.Number     `json:"amount_off"`
	PercentOff            json.Number     `json:"percent_off"`
	AmountLimit           json.Number     `json:"amount_limit"`
	AggregatedAmountLimit json.Number     `json:"aggregated_amount_limit"`
	FixedAmount           json.Number     `json:"fixed_amount"`
	UnitOff               json.Number     `json:"unit_off"`
	Product               *productRef     `json:"product"`
	SKU                   *productRef     `json:"sku"`
	Units                 []discount      `json:"units"`
	raw                   json.RawMessage `json:"-"`
}

type productRef struct {
	ID       string `json:"id"`
	SourceID string `json:"source_id"`
	Name     string `json:"name"`
}

func cents(n json.Number) int64 {
	if n == "" {
		return 0
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return 0
	}
	return roundRat(r)
}

// roundRat rounds half away from zero.
func roundRat(r *big.Rat) int64 {
	num, den := new(big.Int).Set(r.Num()), r.Denom()
	neg := num.Sign() < 0
	num.Abs(num)
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if new(big.Int).Mul(m, big.NewInt(2)).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if neg {
		q.Neg(q)
	}
	return q.Int64()
}

// percentOf is pct % of amount, rounded half away from zero.
func percentOf(amount int64, pct json.Number) int64 {
	p, ok := new(big.Rat).SetString(string(pct))
	if !ok {
		return 0
	}
	r := new(big.Rat).Mul(new(big.Rat).SetInt64(amount), p)
	return roundRat(r.Quo(r, big.NewRat(100, 1)))
}

// Fates of a redeemable Apply leaves out: past the applicable limit, or
// without effect under the no-effect rule SKIP.
const (
	Applies       = ""
	PastLimit     = "limit"
	SkipsNoEffect = "no_effect"
)

// Redeemable is what one redeemable applies to the order: a loyalty card
// paying with its reward (Card), a gift card's credits (Gift), or else a
// stored discount (Discount) on the lines its rules admit (Lines; nil:
// every line).
type Redeemable struct {
	ID       string // the request's name for it, in errors
	Discount json.RawMessage
	Lines    []int
	Gift     *Gift
	Card     *redemptions.CardPayment
}

// Gift is a gift card's balance and the credits asked of it (nil: the
// balance).
type Gift struct {
	Balance int64
	Credits *int64
}

// Options say how Apply applies: Views renders the orders (without, the
// effects carry their amounts alone); Initial is the stacking rules'
// INITIAL_AMOUNT discount calculation mode, percents of the order's (or
// item's) amount before any discount rather than of what the redeemables
// before left (no discount takes more than what remains); at most Limit
// redeemables take effect, and with SkipNoEffect those that change
// nothing are skipped and not counted.
type Options struct {
	Views, Initial bool
	Limit          int
	SkipNoEffect   bool
	// NoFinal leaves the order at the end unrendered (nil), for a caller
	// that shows the effects' orders alone.
	NoFinal bool
}

// Apply applies rs to the order in turn: the order at the end, each one's
// effect, and fates saying which were left out (past the limit, or
// without effect). A UNIT discount of a product the order does not price
// reads the catalogue's price through q (none with a nil q).
func Apply(ctx context.Context, q db.Querier, projectID string, o *orders.Request, rs []Redeemable,
	opt Options) (*OrderView, []Effect, []string, error) {
	c := newCart(o)
	c.initial = opt.Initial
	effects, fates := make([]Effect, len(rs)), make([]string, len(rs))
	counted := 0
	for i := range rs {
		r := &rs[i]
		if counted >= opt.Limit {
			fates[i] = PastLimit
			continue
		}
		before := c.snapshot()
		var ef Effect
		var err error
		switch {
		case r.Card != nil:
			ef = c.pay(r.Card)
		case r.Gift != nil:
			ef = c.gift(r.Gift)
		default:
			ef, err = applyDiscount(ctx, q, projectID, c, r)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if opt.SkipNoEffect && ef.NoEffect {
			fates[i] = SkipsNoEffect
			continue
		}
		counted++
		if opt.Views {
			ef.Order = c.view(before)
		}
		effects[i] = ef
	}
	if !opt.Views || opt.NoFinal {
		return nil, effects, fates, nil
	}
	return c.view(nil), effects, fates, nil
}

func (c *cart) gift(g *Gift) Effect {
	want := g.Balance
	if g.Credits != nil {
		want = *g.Credits
	}
	credits := min(want, c.remaining())
	c.orderDiscount += credits
	return Effect{Credits: credits, Discount: credits, NoEffect: credits == 0,
		Result: map[string]any{"gift": map[string]any{"credits": credits, "balance": g.Balance}}}
}

// pay is a loyalty card paying with its reward: a COIN reward pays what
// remains of the order (up to the points asked or the card's balance) as
// gift credits do; another reward takes its price in points and leaves the
// order as it is, which is still an effect.
func (c *cart) pay(p *redemptions.CardPayment) Effect {
	if !p.IsCoin() {
		pts := p.Price()
		return Effect{Points: pts, Result: map[string]any{"loyalty_card": map[string]any{"points": pts}}}
	}
	pts, paid := p.Coin(c.remaining())
	if paid == 0 {
		pts = 0 // points too few to pay a cent take nothing
	}
	c.orderDiscount += paid
	return Effect{Points: pts, Discount: paid, NoEffect: paid == 0,
		Result: map[string]any{"loyalty_card": map[string]any{"points": pts}}}
}

func applyDiscount(ctx context.Context, q db.Querier, projectID string, c *cart, r *Redeemable) (Effect, error) {
	p, err := parseDiscount(r.Discount)
	if err != nil {
		return Effect{}, fmt.Errorf("engine: stored discount of %s: %w", r.ID, err)
	}
	before := c.orderDiscount + c.itemsDiscount()
	if err := discountCart(ctx, q, projectID, c, r.Lines, p.d); err != nil {
		return Effect{}, err
	}
	took := c.orderDiscount + c.itemsDiscount() - before
	return Effect{Discount: took, NoEffect: took == 0, Result: map[string]any{"discount": p.res}}, nil
}

func discountCart(ctx context.Context, q db.Querier, projectID string, c *cart, lines []int, d discount) error {
	items := c.admitted(lines)
	switch d.Type {
	case "AMOUNT":
		off := cents(d.AmountOff)
		switch d.Effect {
		case "", "APPLY_TO_ORDER":
			c.orderDiscount += min(off, c.remaining())
		case "APPLY_TO_ITEMS":
			capItems(items, func(l *line) int64 { return off }, cents(d.AggregatedAmountLimit))
		case "APPLY_TO_ITEMS_BY_QUANTITY":
			capItems(items, func(l *line) int64 { return off * l.qty }, cents(d.AggregatedAmountLimit))
		case "APPLY_TO_ITEMS_PROPORTIONALLY":
			split(items, off, func(l *line) int64 { return l.remaining() })
		case "APPLY_TO_ITEMS_PROPORTIONALLY_BY_QUANTITY":
			split(items, off, func(l *line) int64 { return l.qty })
		}
	case "PERCENT":
		limit := cents(d.AmountLimit)
		if d.Effect == "" || d.Effect == "APPLY_TO_ORDER" {
			base := c.remaining()
			if c.initial {
				base = c.amount
			}
			off := percentOf(base, d.PercentOff)
			if limit > 0 {
				off = min(off, limit)
			}
			c.orderDiscount += min(off, c.remaining())
		} else {
			if limit == 0 {
				limit = cents(d.AggregatedAmountLimit)
			}
			capItems(items, func(l *line) int64 {
				if c.initial {
					return percentOf(l.amount, d.PercentOff)
				}
				return percentOf(l.remaining(), d.PercentOff)
			}, limit)
		}
	case "FIXED":
		fixed := cents(d.FixedAmount)
		if d.Effect == "" || d.Effect == "APPLY_TO_ORDER" {
			c.orderDiscount += max(0, c.remaining()-fixed)
		} else {
			capItems(items, func(l *line) int64 { return max(0, l.remaining()-fixed*l.qty) }, 0)
		}
	case "UNIT":
		units := d.Units
		if d.Effect != "ADD_MANY_ITEMS" {
			units = []discount{d}
		}
		for _, u := range units {
			if err := addUnits(ctx, q, projectID, c, u); err != nil {
				return err
			}
		}
	}
	return nil
}

// capItems takes off(l) off each line (at most what remains of it) while
// the total stays within limit (0: no limit).
func capItems(items []*line, off func(*line) int64, limit int64) {
	var total int64
	for _, l := range items {
		d := min(off(l), l.remaining())
		if limit > 0 {
			d = min(d, limit-total)
		}
		if d <= 0 {
			continue
		}
		l.discount += d
		total += d
	}
}

// split takes amount off items in proportion to weight (at most what the
// items have left): largest remainders get the odd cents.
func split(items []*line, amount int64, weight func(*line) int64) {
	var left, wsum int64
	for _, l := range items {
		left += l.remaining()
		wsum += weight(l)
	}
	amount = min(amount, left)
	if amount <= 0 || wsum <= 0 {
		return
	}
	type share struct {
		l    *line
		rem  *big.Int
		part int64
	}
	shares := make([]share, 0, len(items))
	var given int64
	for _, l := range items {
		n := new(big.Int).Mul(big.NewInt(amount), big.NewInt(weight(l)))
		q, m := new(big.Int).QuoRem(n, big.NewInt(wsum), new(big.Int))
		p := min(q.Int64(), l.remaining())
		shares = append(shares, share{l, m, p})
		given += p
	}
	for given < amount {
		best := -1
		for i, s := range shares {
			if s.part < s.l.remaining() && (best < 0 || s.rem.Cmp(shares[best].rem) > 0) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		shares[best].part++
		shares[best].rem = big.NewInt(-1)
		given++
	}
	for _, s := range shares {
		s.l.discount += s.part
	}
}

// addUnits gives unit_off units of the discount's product (or SKU) free.
func addUnits(ctx context.Context, q db.Querier, projectID string, c *cart, u discount) error {
	n := cents(u.UnitOff)
	ref := u.Product
	sku := u.SKU != nil && (u.SKU.ID != "" || u.SKU.SourceID != "")
	if sku {
		ref = u.SKU
	}
	if n <= 0 || ref == nil {
		return nil
	}
	var target *line
	for _, l := range c.lines {
		if matchesRef(l.raw, ref, sku) {
			target = l
			break
		}
	}
	price := int64(0)
	if target != nil {
		price = target.price
	}
	if price == 0 {
		p, err := catalogPrice(ctx, q, projectID, ref, sku)
		if err != nil {
			return err
		}
		price = p
	}
	if price == 0 {
		return nil // nothing known to give: no effect
	}
	if u.Effect == "ADD_NEW_ITEMS" || target == nil {
		key := map[bool]string{false: "product_id", true: "sku_id"}[sku]
		raw := map[string]any{key: cmp.Or(ref.ID, ref.SourceID), "quantity": n, "price": price, "object": "order_item"}
		if ref.ID == "" {
			raw = map[string]any{"source_id": ref.SourceID, "related_object": map[bool]string{false: "product", true: "sku"}[sku],
				"quantity": n, "price": price, "object": "order_item"}
		}
		target = &line{raw: raw, price: price, added: true}
		c.lines = append(c.lines, target)
	}
	if target.qty < n {
		add := n - target.qty
		target.qty += add
		target.amount += add * price
		c.amount += add * price
	}
	target.discount += min(n*price, target.remaining())
	return nil
}

// DiscountsItems says whether a stored discount is for specific items of
// the order: an item-level effect on lines its rules admit (some, not
// every line: lines nil), or free units of a product or SKU one of the
// order's lines holds.
func DiscountsItems(raw json.RawMessage, lines []int, o *orders.Request) bool {
	if len(raw) == 0 || string(raw) == "null" || o == nil {
		return false
	}
	var d discount
	if json.Unmarshal(raw, &d) != nil {
		return false
	}
	if d.Type != "UNIT" {
		return strings.HasPrefix(d.Effect, "APPLY_TO_ITEMS") && len(lines) > 0
	}
	units := d.Units
	if d.Effect != "ADD_MANY_ITEMS" {
		units = []discount{d}
	}
	for _, u := range units {
		ref, sku := u.Product, u.SKU != nil && (u.SKU.ID != "" || u.SKU.SourceID != "")
		if sku {
			ref = u.SKU
		}
		if ref == nil {
			continue
		}
		for _, it := range o.Items {
			if matchesRef(it, ref, sku) {
				return true
			}
		}
	}
	return false
}

func matchesRef(raw map[string]any, ref *productRef, sku bool) bool {
	idKey, obj := "product_id", "product"
	if sku {
		idKey, obj = "sku_id", "sku"
	}
	if ref.ID != "" && jsonx.String(raw[idKey]) == ref.ID {
		return true
	}
	if ref.SourceID != "" && jsonx.String(raw["source_id"]) == ref.SourceID && (jsonx.String(raw["related_object"]) == obj ||
		jsonx.String(raw["related_object"]) == "" && !sku) {
		return true
	}
	if m, ok := raw[obj].(map[string]any); ok {
		return ref.ID != "" && jsonx.String(m["id"]) == ref.ID || ref.SourceID != "" && jsonx.String(m["source_id"]) == ref.SourceID
	}
	return false
}

// catalogPrice is a product's or SKU's price in the catalogue, 0 when it
// has none (or there is no catalogue to read: unit tests).
func catalogPrice(ctx context.Context, q db.Querier, projectID string, ref *productRef, sku bool) (int64, error) {
	if q == nil {
		return 0, nil
	}
	p, err := products.PriceIn(ctx, q, projectID, cmp.Or(ref.ID, ref.SourceID), sku)
	if err != nil || p == nil {
		return 0, err
	}
	return *p, nil
}
