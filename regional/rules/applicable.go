package rules

import (
	"encoding/json"
	"fmt"
	"strings"
)

// applicability is a compiled applicable_to.
type applicability struct {
	all      bool
	included []ref
	excluded []ref
}

// compileApplicable checks applicable_to: {included, excluded, included_all}.
func compileApplicable(raw json.RawMessage) (*applicability, error) {
	if isNull(raw) {
		return nil, nil
	}
	v, err := decodeValue(raw)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil, bad("applicable_to", "must be an object with included, excluded and included_all")
	}
	a := &applicability{}
	switch x := m["included_all"].(type) {
	case nil:
	case bool:
		a.all = x
	default:
		return nil, bad("applicable_to.included_all", "must be a boolean")
	}
	for _, side := range []string{"included", "excluded"} {
		var list []any
		switch x := m[side].(type) {
		case nil:
		case []any:
			list = x
		default:
			return nil, bad("applicable_to."+side, "must be an array of products, SKUs or collections")
		}
		if len(list) > maxValues {
			return nil, bad("applicable_to."+side, "holds at most %d entries", maxValues)
		}
		for i, e := range list {
			p := fmt.Sprintf("applicable_to.%s[%d]", side, i)
			r, err := refOf(p, e)
			if err != nil {
				return nil, err
			}
			if em, _ := e.(map[string]any); em != nil && em["effect"] != nil {
				if s, _ := em["effect"].(string); !has(effects, s) {
					return nil, bad(p+".effect", "must be one of %s", strings.Join(effects, ", "))
				}
			}
			if side == "included" {
				a.included = append(a.included, r)
			} else {
				a.excluded = append(a.excluded, r)
			}
		}
	}
	if !a.all && len(a.included) == 0 && len(a.excluded) == 0 {
		return nil, nil // says nothing: every item
	}
	return a, nil
}

// effects are ApplicableToEffect's values.
var effects = []string{"APPLY_TO_EVERY", "APPLY_TO_CHEAPEST", "APPLY_FROM_CHEAPEST", "APPLY_TO_MOST_EXPENSIVE", "APPLY_FROM_MOST_EXPENSIVE"}

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
