package rules

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// screenConds are the conditions random rules are made of: every form an
// Index keys by, and forms it must leave to full evaluation.
var screenConds = []func(r *rand.Rand) string{
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.amount","conditions":{"$more_than":[%d]}}`, r.Intn(10)*1000)
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.amount","conditions":{"$less_than_or_equal":[%d]}}`, r.Intn(10)*1000)
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.amount","conditions":{"$more_than_or_equal":[%d]}}`, r.Intn(10)*1000)
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.amount","conditions":{"$is":[%d]}}`, r.Intn(4)*1000)
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.metadata","property":"color","conditions":{"$is":["c%d"]}}`, r.Intn(4))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.metadata.size","conditions":{"$in":[%d,"s%d",true]}}`, r.Intn(3), r.Intn(3))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.metadata.color","conditions":{"$is_not":["c%d"]}}`, r.Intn(4))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"customer.segment","conditions":{"$in":["seg_%d","seg_%d"]}}`, r.Intn(6), r.Intn(6))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"customer.metadata.tier","conditions":{"$is":["t%d"]}}`, r.Intn(3))
	},
	func(r *rand.Rand) string {
		objs := []string{`"object":"product","id":"prod_%d"`, `"object":"sku","source_id":"sku%d"`, `"id":"prod_%d"`,
			`"object":"product","source_id":"p%d"`, `"object":"products_collection","id":"pc_%d"`}
		mode := []string{"any", "every", "none"}[r.Intn(3)]
		return fmt.Sprintf(`{"name":"order.items.%s","conditions":{"$in":[{`+objs[r.Intn(len(objs))]+`}]}}`, mode, r.Intn(5))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.items.price_any","conditions":{"$more_than":[%d]}}`, r.Intn(5)*500)
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"date","conditions":{"$after":["2026-0%d-01T00:00:00Z"]}}`, 1+r.Intn(9))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"date","conditions":{"$before":["2026-0%d-01T00:00:00Z"]}}`, 1+r.Intn(9))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"redemption.count.per_customer","conditions":{"$less_than":[%d]}}`, 1+r.Intn(3))
	},
	func(r *rand.Rand) string {
		return fmt.Sprintf(`{"name":"order.amount","conditions":{"$more_than":[%d]},"rules":{"1":%s}}`, r.Intn(5)*1000,
			`{"name":"order.metadata.color","conditions":{"$is":["c1"]}}`)
	},
}

// randomRule is one to three conditions under random logic.
func randomRule(r *rand.Rand) string {
	n := 1 + r.Intn(3)
	doc := "{"
	for i := 1; i <= n; i++ {
		doc += fmt.Sprintf(`"%d":%s,`, i, screenConds[r.Intn(len(screenConds))](r))
	}
	logic := []string{"1", "1 and 2", "1 or 2", "(1 or 2) and 3", "1 and (2 or 3)", "1 and 2 and 3", "3 or 2 or 1"}
	var ok []string
	for _, l := range logic {
		if (n >= 3 || !containsDigit(l, '3')) && (n >= 2 || !containsDigit(l, '2')) {
			ok = append(ok, l)
		}
	}
	return doc + `"logic":"` + ok[r.Intn(len(ok))] + `"}`
}

func containsDigit(s string, d rune) bool {
	for _, c := range s {
		if c == d {
			return true
		}
	}
	return false
}

// randomInput is an order, a customer (or none) and a time.
func randomInput(r *rand.Rand) Input {
	in := Input{Now: time.Date(2026, time.Month(1+r.Intn(12)), 1+r.Intn(28), 0, 0, 0, 0, time.UTC), Scope: Scope(r.Intn(3)),
		Redemptions: RedemptionCounts{PerCustomer: int64(r.Intn(3))}}
	if r.Intn(8) > 0 {
		o := &Order{Metadata: map[string]any{}}
		if r.Intn(2) == 0 {
			a := int64(r.Intn(10) * 1000)
			o.Amount = &a
		}
		for i := r.Intn(3); i > 0; i-- {
			it := Item{Quantity: 1, Price: int64(r.Intn(5) * 600), CollectionIDs: []string{fmt.Sprintf("pc_%d", r.Intn(5))}}
			switch r.Intn(3) {
			case 0:
				it.ProductID = fmt.Sprintf("prod_%d", r.Intn(5))
			case 1:
				it.ProductSourceID = fmt.Sprintf("p%d", r.Intn(5))
			default:
				it.SKUSourceID, it.ProductID = fmt.Sprintf("sku%d", r.Intn(5)), fmt.Sprintf("prod_%d", r.Intn(5))
			}
			o.Items = append(o.Items, it)
		}
		if r.Intn(3) > 0 {
			o.Metadata["color"] = fmt.Sprintf("c%d", r.Intn(4))
		}
		switch r.Intn(4) {
		case 0:
			o.Metadata["size"] = float64(r.Intn(3))
		case 1:
			o.Metadata["size"] = []any{fmt.Sprintf("s%d", r.Intn(3)), "x"}
		case 2:
			o.Metadata["size"] = true
		}
		in.Order = o
	}
	if r.Intn(5) > 0 {
		c := &Customer{ID: "cust_1", Metadata: map[string]any{"tier": fmt.Sprintf("t%d", r.Intn(3))}}
		for i := r.Intn(3); i > 0; i-- {
			c.Segments = append(c.Segments, fmt.Sprintf("seg_%d", r.Intn(6)))
		}
		in.Customer = c
	}
	return in
}

// An Index never leaves out an entry whose programs all hold, over random
// rules (each entry one or two) and random inputs in every scope, and it
// does leave out most of the others.
func TestIndexKeepsEveryEntryThatHolds(t *testing.T) {
	r := rand.New(rand.NewSource(39))
	const entries = 400
	progs := make([][]*Program, entries)
	for i := range progs {
		for k := 1 + r.Intn(2); k > 0; k-- {
			doc := randomRule(r)
			p, err := Compile(json.RawMessage(doc), nil, nil)
			if err != nil {
				t.Fatalf("compile %s: %v", doc, err)
			}
			progs[i] = append(progs[i], p)
		}
	}
	x := NewIndex(progs)
	var holding, kept, all int
	for n := 0; n < 3000; n++ {
		in := randomInput(r)
		cands := x.Candidates(&in)
		isCand := map[int]bool{}
		for _, i := range cands {
			isCand[i] = true
		}
		for i, ps := range progs {
			holds := true
			for _, p := range ps {
				if !p.Run("val_1", &in).Valid {
					holds = false
					break
				}
			}
			if holds {
				holding++
			}
			if holds && !isCand[i] {
				t.Fatalf("input %d (%+v, order %+v, customer %+v): entry %d holds but was left out", n, in, in.Order, in.Customer, i)
			}
		}
		kept += len(cands)
		all += entries
	}
	t.Logf("kept %d of %d entries (%d held)", kept, all, holding)
	if failing, pruned := all-holding, all-kept; pruned < failing/2 {
		t.Fatalf("left out %d of the %d entries that fail: the index prunes too little", pruned, failing)
	}
}
