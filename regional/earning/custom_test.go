package earning

import (
	"encoding/json"
	"testing"
)

func TestCustomEventPointsAreExactAndBounded(t *testing.T) {
	rule := func(every string, points int64) RulePoints {
		return RulePoints{Type: "PROPORTIONAL", CalculationType: "CUSTOM_EVENT_METADATA",
			CustomEvent: &RuleEventMetadata{Metadata: &EveryProperty{Every: json.Number(every), Points: points, Property: "n"}}}
	}
	five := int64(5)
	for _, c := range []struct {
		name  string
		rule  RulePoints
		value any
		want  int64
	}{
		{"fixed", RulePoints{Type: "FIXED", Points: &five}, nil, 5},
		{"every 100 of 250", rule("100", 3), json.Number("250"), 6},
		{"a tenth, exactly: 0.3 is three", rule("0.1", 1), json.Number("0.3"), 3},
		{"a float64 value", rule("0.1", 1), 0.3, 3},
		{"under one unit", rule("100", 3), json.Number("99.99"), 0},
		{"negative", rule("1", 3), json.Number("-50"), 0},
		{"zero", rule("1", 3), json.Number("0"), 0},
		{"not a number", rule("1", 3), "12", 0},
		{"missing", rule("1", 3), nil, 0},
		{"capped, not wrapped", rule("1", 1_000_000_000), json.Number("18446744074"), maxEventPoints},
		{"a huge exponent, capped", rule("1", 1), json.Number("1e400"), maxEventPoints},
	} {
		meta := map[string]any{}
		if c.value != nil {
			meta["n"] = c.value
		}
		if got := c.rule.pointsFor(meta); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
