package rules

import (
	"encoding/json"
	"sort"
	"time"
)

// kind is what a name's value is, and so which conditions it takes.
type kind int

const (
	kInt    kind = iota // a whole number: an amount in cents, a count, a quantity
	kString             // text: an id
	kAny                // a metadata value: text, a number, a boolean, a date in text, a list
	kSet                // a set of strings: the customer's segments
	kItems              // the order's items, matched against products, SKUs, collections
	kTime               // the evaluation time
)

// quant is how a name that reads a list of values (each item's price)
// applies a rule's conditions: to one of them or to each.
type quant int

const (
	qOne quant = iota
	qAny
	qEach
)

// items modes of order.items.any, every and none.
type itemsMode int

const (
	itemsAny itemsMode = iota + 1
	itemsEvery
	itemsNone
)

// name is one rule name the language knows.
type name struct {
	id    string // the name, as names holds it
	kind  kind
	prop  bool // takes a property: the metadata key (or name.<key>)
	item  bool // read from one order item: only inside order.items.any/every/none
	quant quant
	mode  itemsMode
	read  func(s *scope, prop string) any
}

// names are the rule names served. Metadata names take their key as
// `property` (the reference's form) or after a dot (order.metadata.color).
var names = map[string]name{
	"order.amount":                    {kind: kInt, read: readOrder(func(o *Order) any { return num(o.amount()) })},
	"order.initial_amount":            {kind: kInt, read: readOrder(func(o *Order) any { return num(o.initialAmount()) })},
	"order.items.count":               {kind: kInt, read: readOrder(func(o *Order) any { return num(int64(len(o.Items))) })},
	"order.items.quantity":            {kind: kInt, read: readItemsQuantity},
	"order.items.aggregated_quantity": {kind: kInt, read: readAggregatedQuantity},
	"order.items.aggregated_amount":   {kind: kInt, read: readAggregatedAmount},
	"order.items.price_any":           {kind: kInt, quant: qAny, read: readPrices},
	"order.items.price_each":          {kind: kInt, quant: qEach, read: readPrices},
	"order.items.price":               {kind: kInt, item: true, read: func(s *scope, _ string) any { return num(s.item.Price) }},
	"order.items.amount":              {kind: kInt, item: true, read: func(s *scope, _ string) any { return num(s.item.amount()) }},
	"order.items.metadata":            {kind: kAny, prop: true, item: true, read: func(s *scope, p string) any { return meta(s.item.Metadata, p) }},
	"order.items.any":                 {kind: kItems, mode: itemsAny},
	"order.items.every":               {kind: kItems, mode: itemsEvery},
	"order.items.none":                {kind: kItems, mode: itemsNone},
	"order.metadata":                  {kind: kAny, prop: true, read: func(s *scope, p string) any { return orderMeta(s, p) }},
	"customer.id":                     {kind: kString, read: readCustomer(func(c *Customer, _ string) any { return text(c.ID) })},
	"customer.source_id":              {kind: kString, read: readCustomer(func(c *Customer, _ string) any { return text(c.SourceID) })},
	"customer.metadata":               {kind: kAny, prop: true, read: readCustomer(func(c *Customer, p string) any { return meta(c.Metadata, p) })},
	"customer.segment":                {kind: kSet, read: readCustomer(func(c *Customer, _ string) any { return strs(c.Segments) })},
	"custom_event.metadata":           {kind: kAny, prop: true, read: readEventMeta},
	"redemption.metadata":             {kind: kAny, prop: true, read: func(s *scope, p string) any { return meta(s.in.Metadata, p) }},
	"redemption.count.per_customer":   {kind: kInt, read: func(s *scope, _ string) any { return num(s.in.Redemptions.PerCustomer + 1) }},
	"redemption.count.per_campaign":   {kind: kInt, read: func(s *scope, _ string) any { return num(s.in.Redemptions.PerCampaign + 1) }},
	"redemption.count.per_day":        {kind: kInt, read: func(s *scope, _ string) any { return num(s.in.Redemptions.PerDay + 1) }},
	"date":                            {kind: kTime, read: func(s *scope, _ string) any { return s.now() }},
}

func init() {
	for id, n := range names {
		n.id = id
		names[id] = n
	}
}

// Names lists the rule names served, sorted.
func Names() []string {
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Readers of the input's values, normalised to what the tests compare:
// nil (unknown), float64, string, bool, time.Time, []any.

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
