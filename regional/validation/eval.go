package validation

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
)

// Input is what a rule is evaluated against: the order, the customer, the
// redemption counts and the time, as the caller (the validation and
// redemption engine) knows them. A nil Order or Customer makes the names
// that read it unknown.
type Input struct {
	Order    *Order
	Customer *Customer
	// Redemptions are the redemptions made so far; a rule counts the one
	// being validated too, so "redemption.count.per_customer" $less_than_equal
	// [1] lets each customer redeem once.
	Redemptions RedemptionCounts
	// Now is the evaluation time ("date" conditions); zero is the wall clock.
	Now time.Time
	// Event is the custom event being handled (custom_event.metadata), if any.
	Event *Event
	// Metadata is the request's own metadata (redemption.metadata).
	Metadata map[string]any
	// Scope is which conditions are read; the others hold.
	Scope Scope
}

// Scope is which of a rule's conditions an evaluation reads
// (qualifications' scenarios); a condition not read holds, its nested
// conditions aside.
type Scope int

const (
	// ScopeAll reads every condition.
	ScopeAll Scope = iota
	// ScopeAudience reads only the customer's conditions (customer.*):
	// the order's, the redemption counts, dates and events hold.
	ScopeAudience
	// ScopeWithoutCustomer reads every condition but the customer's.
	ScopeWithoutCustomer
)

// skips says whether sc leaves c unread.
func (sc Scope) skips(c *cond) bool {
	switch sc {
	case ScopeAudience:
		return !c.customer
	case ScopeWithoutCustomer:
		return c.customer
	}
	return false
}

// Order is the order under validation. Amounts are in cents.
type Order struct {
	ID       string
	SourceID string
	// Amount is the order's amount (0 is an amount); nil is the sum of its
	// items' amounts.
	Amount *int64
	// InitialAmount is the amount before discounts; nil is Amount.
	InitialAmount *int64
	Items         []Item
	Metadata      map[string]any
}

// Item is an order line.
type Item struct {
	ProductID       string
	ProductSourceID string
	SKUID           string
	SKUSourceID     string
	// CollectionIDs are the product collections the line's product is in.
	CollectionIDs []string
	Quantity      int64
	// Price is the unit price; Amount the line's amount (nil is Price ×
	// Quantity).
	Price    int64
	Amount   *int64
	Metadata map[string]any // the line's product (or SKU) metadata
}

// Customer is the customer validating or redeeming.
type Customer struct {
	ID       string
	SourceID string
	Metadata map[string]any
	// Segments are the ids of the segments the customer is in.
	Segments []string
}

// RedemptionCounts are counts of redemptions made so far.
type RedemptionCounts struct {
	PerCustomer int64 // by this customer, in the campaign (or of the object) the rule guards
	PerCampaign int64 // in the campaign, by anyone
	PerDay      int64 // today, in the campaign
}

// Event is a custom event.
type Event struct {
	Type     string
	Metadata map[string]any
}

// Verdict is a rule's answer for an input.
type Verdict struct {
	Valid bool
	// Error says why not, when not valid.
	Error *RuleError
	// Applicable are the indexes in Order.Items of the lines the rule's
	// applicable_to admits (included or included_all, less excluded); nil
	// when applicable_to names nothing, that is every line.
	Applicable []int
}

// RuleError is why a rule failed.
type RuleError struct {
	RuleID string
	// Condition is the key path of the condition that failed the rule ("2",
	// "3.1" for a nested one): the condition whose message is given, or the
	// failing top-level condition when none has a message.
	Condition string
	// Message is the most specific error.message on the failure's path:
	// the failing condition's, a nested condition's, else the rule's; ""
	// when none was given (the caller's default applies).
	Message string
}

// scope is where a condition reads from: the input and, inside
// order.items.any/every/none, the one item and the lines matching the same
// product, SKU or collection.
type scope struct {
	in    *Input
	item  *Item
	group []*Item
}

func (s *scope) now() time.Time {
	if s.in.Now.IsZero() {
		return time.Now()
	}
	return s.in.Now
}

// run evaluates p against in.
func (p *program) run(ruleID string, in *Input) Verdict {
	s := &scope{in: in}
	v := Verdict{Valid: true}
	if ok, why := p.root.eval(s); !ok {
		v.Valid = false
		v.Error = &RuleError{RuleID: ruleID, Message: p.message}
		if why != nil {
			v.Error.Condition = why.path
			if why.message != "" {
				v.Error.Message = why.message
			}
		}
	}
	if p.applicable != nil {
		v.Applicable = p.applicable.lines(in.Order)
	}
	return v
}

func (g *group) eval(s *scope) (bool, *cond) {
	if g == nil || len(g.conds) == 0 {
		return true, nil
	}
	return g.logic.eval(g, s)
}

// eval says whether c holds in s; when not, the condition to blame: the
// deepest failing one with a message on the path, else c itself.
func (c *cond) eval(s *scope) (bool, *cond) {
	var ok bool
	var inner *cond
	switch {
	case c.spec.kind == kItems && s.in.Scope.skips(c):
		ok = true // its nested conditions read the lines: unread with them
	case s.in.Scope.skips(c):
		ok = true
		if c.sub != nil {
			ok, inner = c.sub.eval(s)
		}
	case c.spec.kind == kItems && c.empty:
		ok = true // no product, SKU or collection to look for
	case c.spec.kind == kItems:
		ok, inner = c.items(s)
	default:
		ok = c.holds(c.spec.read(s, c.prop))
		if ok && c.sub != nil {
			ok, inner = c.sub.eval(s)
		}
	}
	switch {
	case ok:
		return true, nil
	case inner != nil && inner.message != "":
		return false, inner
	}
	return false, c
}

// holds applies c's tests to v: each to v, or for a list name (each item's
// price) to one element (price_any) or to every element (price_each).
func (c *cond) holds(v any) bool {
	all := func(v any) bool {
		for _, t := range c.tests {
			if !t(v) {
				return false
			}
		}
		return true
	}
	list, isList := v.([]any)
	if c.spec.quant == qOne || !isList || len(list) == 0 {
		if isList && len(list) == 0 {
			v = nil // no items: unknown
		}
		return all(v)
	}
	for _, e := range list {
		ok := all(e)
		if c.spec.quant == qAny && ok {
			return true
		}
		if c.spec.quant == qEach && !ok {
			return false
		}
	}
	return c.spec.quant == qEach
}

// items evaluates order.items.any/every/none: for each listed product, SKU
// or collection, whether a line matches it and meets the nested rules.
// any: one listed object is met; every: each is; none: none is.
func (c *cond) items(s *scope) (bool, *cond) {
	var lines []Item
	if s.in.Order != nil {
		lines = s.in.Order.Items
	}
	var first *cond
	for _, r := range c.refs {
		var group []*Item
		for i := range lines {
			if r.matches(&lines[i]) {
				group = append(group, &lines[i])
			}
		}
		met := false
		var refWhy *cond // why this object's lines failed; nil: it has none
		for _, it := range group {
			ok, why := c.sub.eval(&scope{in: s.in, item: it, group: group})
			if ok {
				met = true
				break
			}
			if refWhy == nil {
				refWhy = why
			}
		}
		if first == nil {
			first = refWhy
		}
		switch {
		case c.spec.mode == itemsAny && met:
			return true, nil
		case c.spec.mode == itemsEvery && !met:
			return false, refWhy // the object that is missing, or failed
		case c.spec.mode == itemsNone && met:
			return false, nil
		}
	}
	if c.spec.mode == itemsAny {
		return false, first
	}
	return true, nil
}

// namesItemOf says whether g requires (order.items.any or every, at any
// depth) a product, SKU or collection one of lines matches.
func (g *group) namesItemOf(lines []Item) bool {
	if g == nil {
		return false
	}
	for _, c := range g.conds {
		if c.spec.kind == kItems && c.spec.mode != itemsNone {
			for _, r := range c.refs {
				for i := range lines {
					if r.matches(&lines[i]) {
						return true
					}
				}
			}
		}
		if c.sub.namesItemOf(lines) {
			return true
		}
	}
	return false
}

func (r ref) matches(it *Item) bool {
	product := func() bool {
		return r.id != "" && r.id == it.ProductID || r.sourceID != "" && r.sourceID == it.ProductSourceID
	}
	sku := func() bool {
		return r.id != "" && r.id == it.SKUID || r.sourceID != "" && r.sourceID == it.SKUSourceID
	}
	switch r.object {
	case "product":
		return product()
	case "sku":
		return sku()
	case "products_collection":
		return has(it.CollectionIDs, r.id)
	}
	return product() || sku()
}

// lines are the indexes of the order's lines a applicable_to admits.
func (a *applicability) lines(o *Order) []int {
	out := []int{}
	if o == nil {
		return out
	}
	for i := range o.Items {
		it := &o.Items[i]
		in := a.all || anyOf(a.included, func(r ref) bool { return r.matches(it) })
		if len(a.included) == 0 && !a.all {
			in = true // only exclusions: every other line
		}
		if in && !anyOf(a.excluded, func(r ref) bool { return r.matches(it) }) {
			out = append(out, i)
		}
	}
	return out
}

// Readers of the input's values, normalised to what the tests compare:
// nil (unknown), float64, string, bool, time.Time, []any.

func (o *Order) amount() int64 {
	if o.Amount != nil {
		return *o.Amount
	}
	var sum int64
	for i := range o.Items {
		sum += o.Items[i].amount()
	}
	return sum
}

func (o *Order) initialAmount() int64 {
	if o.InitialAmount != nil {
		return *o.InitialAmount
	}
	return o.amount()
}

func (it *Item) amount() int64 {
	if it.Amount != nil {
		return *it.Amount
	}
	return it.Price * it.Quantity
}

// Check refuses (400, naming the line) an order whose amounts the rules
// could not read exactly: a line's price × quantity, or the lines' sum,
// beyond ±2^53 (the numbers rules compare), which would otherwise wrap.
func (o *Order) Check() error {
	if o == nil {
		return nil
	}
	within := func(n int64) bool { return n >= -maxSafeInt && n <= maxSafeInt }
	var sum int64
	for i := range o.Items {
		it := &o.Items[i]
		if it.Amount == nil && !(within(it.Price) && within(it.Quantity) &&
			(it.Quantity == 0 || abs(it.Price) <= maxSafeInt/abs(it.Quantity))) {
			return apierr.InvalidPayload(fmt.Sprintf("order.items[%d]: price × quantity (%d × %d) is beyond %d",
				i, it.Price, it.Quantity, int64(maxSafeInt)))
		}
		a := it.amount()
		if !within(a) || !within(sum+a) {
			return apierr.InvalidPayload(fmt.Sprintf("order.items[%d]: the items' amounts add up beyond %d", i, int64(maxSafeInt)))
		}
		sum += a
	}
	return nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func num(n int64) any { return float64(n) }

func text(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func strs(ss []string) any {
	if len(ss) == 0 {
		return nil
	}
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func readOrder(f func(o *Order) any) func(s *scope, _ string) any {
	return func(s *scope, _ string) any {
		if s.in.Order == nil {
			return nil
		}
		return f(s.in.Order)
	}
}

func readCustomer(f func(c *Customer, p string) any) func(s *scope, p string) any {
	return func(s *scope, p string) any {
		if s.in.Customer == nil {
			return nil
		}
		return f(s.in.Customer, p)
	}
}

func orderMeta(s *scope, p string) any {
	if s.in.Order == nil {
		return nil
	}
	return meta(s.in.Order.Metadata, p)
}

func readEventMeta(s *scope, p string) any {
	if s.in.Event == nil {
		return nil
	}
	return meta(s.in.Event.Metadata, p)
}

// readItemsQuantity is the line's quantity inside an items rule, else the
// order's total quantity.
func readItemsQuantity(s *scope, _ string) any {
	if s.item != nil {
		return num(s.item.Quantity)
	}
	return readAggregatedQuantity(s, "")
}

// readAggregatedQuantity sums the quantities of the lines matching the same
// listed object inside an items rule, else of the whole order.
func readAggregatedQuantity(s *scope, _ string) any {
	return sumLines(s, func(it *Item) int64 { return it.Quantity })
}

func readAggregatedAmount(s *scope, _ string) any {
	return sumLines(s, (*Item).amount)
}

func sumLines(s *scope, f func(*Item) int64) any {
	var sum int64
	if s.item != nil {
		for _, it := range s.group {
			sum += f(it)
		}
		return num(sum)
	}
	if s.in.Order == nil {
		return nil
	}
	for i := range s.in.Order.Items {
		sum += f(&s.in.Order.Items[i])
	}
	return num(sum)
}

// readPrices lists each line's unit price (the line itself inside an
// items rule).
func readPrices(s *scope, _ string) any {
	if s.item != nil {
		return num(s.item.Price)
	}
	if s.in.Order == nil {
		return nil
	}
	out := make([]any, len(s.in.Order.Items))
	for i := range s.in.Order.Items {
		out[i] = num(s.in.Order.Items[i].Price)
	}
	return out
}

// meta reads key of a metadata object, normalised.
func meta(m map[string]any, key string) any {
	if m == nil {
		return nil
	}
	return norm(m[key])
}

func norm(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64, time.Time:
		return x
	case int:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case uint:
		return float64(x)
	case uint32:
		return float64(x)
	case uint64:
		return float64(x)
	case float32:
		return float64(x)
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = norm(e)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	}
	return v // an object: known, equal to nothing
}
