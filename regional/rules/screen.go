package rules

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// An Index screens many entries (a project's promotion tiers), each
// passing only when all its programs hold, by the cheap parts of their
// rules, so that a caller runs in full only the entries that may pass.
// It is exact: an entry it leaves out has a program that cannot hold for
// the input (Candidates' property test); those it keeps may still fail.
//
// An entry is keyed by one guard: a condition its rule's top-level logic
// requires (a leaf, or one of an "and"), of one of these forms:
//   - $is or $in of a name read from the input (order.metadata.<key>,
//     customer.segment, …): found by the value the input holds;
//   - order.items.any or every naming products or SKUs (not collections,
//     whose lines are marked later): found by the order's lines;
//   - a lower or upper bound ($more_than…, $less_than…, date's $after
//     and $before): found by a binary search on the value.
//
// Redemption counts, which differ by entry, and conditions a scope does
// not read are no guards. An entry without a guard is always a candidate.
type Index struct {
	n      int
	guards [][]*cond // each entry's guard conditions, in its programs' order
	once   [3]sync.Once
	by     [3]*scopeIndex // by Scope, built when first asked
}

// NewIndex indexes entries: entry i holds when every program of
// programs[i] holds (a nil program is unknown: the entry is not screened).
func NewIndex(programs [][]*Program) *Index {
	x := &Index{n: len(programs), guards: make([][]*cond, len(programs))}
	for i, ps := range programs {
		for _, p := range ps {
			if p == nil {
				x.guards[i] = nil
				break
			}
			x.guards[i] = append(x.guards[i], p.root.required()...)
		}
	}
	return x
}

// required are the conditions g's logic cannot hold without.
func (g *group) required() []*cond {
	if g == nil || len(g.conds) == 0 {
		return nil
	}
	var out []*cond
	var walk func(e expr)
	walk = func(e expr) {
		switch e := e.(type) {
		case leaf:
			if c := g.conds[string(e)]; c != nil {
				out = append(out, c)
			}
		case and:
			for _, x := range e {
				walk(x)
			}
		case or:
			if len(e) == 1 {
				walk(e[0])
			}
		}
	}
	walk(g.logic)
	return out
}

// guardKind says how c screens under sc: 0 not at all.
const (
	gNone = iota
	gEqual
	gItems
	gBound
)

func guardKind(c *cond, sc Scope) int {
	switch {
	case sc.skips(c) || c.spec.item:
		return gNone
	case c.spec.kind == kItems:
		if c.empty || c.spec.mode == itemsNone || len(c.refs) == 0 && c.spec.mode == itemsEvery {
			return gNone
		}
		for _, r := range c.refs {
			if r.object == "products_collection" {
				return gNone
			}
		}
		return gItems
	case c.spec.read == nil || strings.HasPrefix(c.spec.id, "redemption.count."):
		return gNone // counts are each entry's own, not the input's
	case len(c.eqs) > 0:
		return gEqual
	case len(c.lo)+len(c.hi) > 0 && c.spec.quant == qOne:
		return gBound
	}
	return gNone
}

// scopeIndex is the index of one scope.
type scopeIndex struct {
	always []int
	equal  map[string]map[any][]int // by reader (name, property), by value
	read   map[string]*cond         // a condition of each reader, to read the input with
	items  map[ref][]int            // by product or SKU, by id or source id (object "p" or "s")
	bounds map[string]*bounds       // by reader
}

type bounds struct {
	lo, hi []bound // lo ascending, hi descending
}

type bound struct {
	at    float64
	entry int
}

func readerOf(c *cond) string { return c.spec.id + "\x00" + c.prop }

func (x *Index) scope(sc Scope) *scopeIndex {
	if sc < 0 || int(sc) >= len(x.by) {
		sc = ScopeAll
	}
	x.once[sc].Do(func() { x.by[sc] = x.build(sc) })
	return x.by[sc]
}

func (x *Index) build(sc Scope) *scopeIndex {
	s := &scopeIndex{equal: map[string]map[any][]int{}, read: map[string]*cond{}, items: map[ref][]int{},
		bounds: map[string]*bounds{}}
	for i, gs := range x.guards {
		var best *cond
		kind := gNone
		for _, c := range gs {
			// A set or a product is more telling than a bound.
			if k := guardKind(c, sc); k != gNone && (kind == gNone || kind == gBound && k != gBound) {
				best, kind = c, k
			}
		}
		switch kind {
		case gNone:
			s.always = append(s.always, i)
		case gEqual:
			r := readerOf(best)
			s.read[r] = best
			if s.equal[r] == nil {
				s.equal[r] = map[any][]int{}
			}
			for _, v := range best.eqs[0] {
				s.equal[r][v] = appendOnce(s.equal[r][v], i)
			}
		case gItems:
			for _, k := range itemKeys(best.refs) {
				s.items[k] = appendOnce(s.items[k], i)
			}
		case gBound:
			r := readerOf(best)
			s.read[r] = best
			b := s.bounds[r]
			if b == nil {
				b = &bounds{}
				s.bounds[r] = b
			}
			if len(best.lo) > 0 {
				b.lo = append(b.lo, bound{maxOf(best.lo), i})
			} else {
				b.hi = append(b.hi, bound{minOf(best.hi), i})
			}
		}
	}
	for _, b := range s.bounds {
		sort.Slice(b.lo, func(i, j int) bool { return b.lo[i].at < b.lo[j].at })
		sort.Slice(b.hi, func(i, j int) bool { return b.hi[i].at > b.hi[j].at })
	}
	return s
}

func appendOnce(l []int, i int) []int {
	if n := len(l); n > 0 && l[n-1] == i {
		return l
	}
	return append(l, i)
}

// itemKeys are the keys a line matching one of refs has: a product's or a
// SKU's id or source id (ref.matches: an unnamed object is either).
func itemKeys(refs []ref) []ref {
	var out []ref
	for _, r := range refs {
		for _, o := range []string{"p", "s"} {
			if r.object == "product" && o == "s" || r.object == "sku" && o == "p" {
				continue
			}
			if r.id != "" {
				out = append(out, ref{object: o, id: r.id})
			}
			if r.sourceID != "" {
				out = append(out, ref{object: o, sourceID: r.sourceID})
			}
		}
	}
	return out
}

func maxOf(fs []float64) float64 {
	m := fs[0]
	for _, f := range fs[1:] {
		if f > m {
			m = f
		}
	}
	return m
}

func minOf(fs []float64) float64 {
	m := fs[0]
	for _, f := range fs[1:] {
		if f < m {
			m = f
		}
	}
	return m
}

// ReadsSegments says whether screening in under scope sc reads the
// customer's segments, which the caller then gives in in.Customer.
func (x *Index) ReadsSegments(sc Scope) bool {
	for _, c := range x.scope(sc).read {
		if c.spec.id == "customer.segment" {
			return true
		}
	}
	return false
}

// Candidates are the entries that may hold for in (its Scope read), in
// ascending order; Screened counts them against Len.
func (x *Index) Candidates(in *Input) []int {
	s := x.scope(in.Scope)
	keep := make([]bool, x.n)
	for _, i := range s.always {
		keep[i] = true
	}
	sc := &scope{in: in}
	for r, byValue := range s.equal {
		v := s.read[r].spec.read(sc, s.read[r].prop)
		if l, ok := v.([]any); ok {
			for _, e := range l {
				mark(keep, byValue, e)
			}
		} else {
			mark(keep, byValue, v)
		}
	}
	if len(s.items) > 0 && in.Order != nil {
		for _, it := range in.Order.Items {
			for _, k := range []ref{{object: "p", id: it.ProductID}, {object: "p", sourceID: it.ProductSourceID},
				{object: "s", id: it.SKUID}, {object: "s", sourceID: it.SKUSourceID}} {
				if k.id != "" || k.sourceID != "" {
					for _, i := range s.items[k] {
						keep[i] = true
					}
				}
			}
		}
	}
	for r, b := range s.bounds {
		f, ok := boundValue(s.read[r].spec.read(sc, s.read[r].prop))
		if !ok {
			continue // a comparison holds only for a number (a date)
		}
		for _, e := range b.lo {
			if e.at > f {
				break
			}
			keep[e.entry] = true
		}
		for _, e := range b.hi {
			if e.at < f {
				break
			}
			keep[e.entry] = true
		}
	}
	out := make([]int, 0, 64)
	for i, k := range keep {
		if k {
			out = append(out, i)
		}
	}
	return out
}

// Len is the number of entries indexed.
func (x *Index) Len() int { return x.n }

func mark(keep []bool, byValue map[any][]int, v any) {
	switch v.(type) {
	case float64, string, bool: // what an equality's set holds
		for _, i := range byValue[v] {
			keep[i] = true
		}
	}
}

// boundValue is a value as its bounds were kept: a number, or a date in
// microseconds (truncation keeps the order, so no candidate is lost).
func boundValue(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case time.Time:
		return float64(x.UnixMicro()), true
	}
	return 0, false
}
