package rules

import (
	"time"

	"github.com/tallyhq/tally/internal/geo"
)

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

// Run evaluates p against in; ruleID is the rule the verdict's error names.
func (p *Program) Run(ruleID string, in *Input) Verdict {
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

// Locations are the ids of the locations p's $in_location conditions name,
// whose shapes the caller gives in Input.Locations.
func (p *Program) Locations() []string { return p.locations }

// Collections are the ids of the product collections p names (in
// order.items conditions at any depth, and in applicable_to), each once:
// the caller sets Item.CollectionIDs of the lines in them.
func (p *Program) Collections() []string {
	var out []string
	add := func(rs []ref) {
		for _, r := range rs {
			if r.object == "products_collection" && r.id != "" {
				out = append(out, r.id)
			}
		}
	}
	var walk func(g *group)
	walk = func(g *group) {
		if g == nil {
			return
		}
		for _, c := range g.conds {
			add(c.refs)
			walk(c.sub)
		}
	}
	walk(p.root)
	if p.applicable != nil {
		add(p.applicable.included)
		add(p.applicable.excluded)
	}
	return uniq(out)
}

// ReadsCounts says whether p reads redemption counts (redemption.count.*),
// at any depth: only then need the caller count them.
func (p *Program) ReadsCounts() bool { return p.counts }

// ReadsSegments says whether p reads the customer's segments, which the
// caller then finds (a query and the project's segment filters).
func (p *Program) ReadsSegments() bool { return p.segments }

// NamesItemOf says whether p requires a product, SKU or collection
// (order.items.any or every, at any depth) that a line of o matches:
// qualifications' PRODUCTS scenarios.
func (p *Program) NamesItemOf(o *Order) bool {
	if o == nil || len(o.Items) == 0 {
		return false
	}
	return p.root.namesItemOf(o.Items)
}

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
		v := c.spec.read(s, c.prop)
		ok = c.holds(v) && c.within(s, v)
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

// within applies $in_location: the value (a geopoint, or a list of them of
// which one must do) lies in one of c's locations. Without a value, or with
// one that is not a geopoint, it holds for nothing; a location the caller
// did not give (deleted) holds nothing.
func (c *cond) within(s *scope, v any) bool {
	if len(c.locs) == 0 {
		return true
	}
	return geo.InAny(v, c.locs, s.in.Locations)
}
