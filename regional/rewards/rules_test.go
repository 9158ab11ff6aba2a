package rewards

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/apierr"
)

func sp(v string) *string { return &v }

// refusal fails t unless err is a 400 with key whose details say want.
func refusal(t *testing.T, err error, key, want string) {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) || e.Status != 400 || e.Key != key || !strings.Contains(e.Details, want) {
		t.Fatalf("error %v, want a 400 %s saying %q", err, key, want)
	}
}

// A reward is of the kind its parameters name, exactly one of them.
func TestParametersMakeTheRewardsKind(t *testing.T) {
	product := &Product{ID: "prod_1"}
	coin := &CoinRatio{ExchangeRatio: 1, PointsRatio: 10}
	for _, c := range []struct {
		name    string
		p       requestParams
		typ     string // "" when refused
		key     string
		details string
	}{
		{"a product is MATERIAL", requestParams{Product: product}, Material, "", ""},
		{"a product with its SKU", requestParams{Product: &Product{ID: "prod_1", SKUID: sp("sku_1")}}, Material, "", ""},
		{"a coin ratio is COIN", requestParams{Coin: coin}, Coin, "", ""},
		{"a fractional exchange ratio", requestParams{Coin: &CoinRatio{ExchangeRatio: 0.25, PointsRatio: 1}}, Coin, "", ""},
		{"the largest points ratio", requestParams{Coin: &CoinRatio{ExchangeRatio: 1e9, PointsRatio: 1_000_000_000}}, Coin, "", ""},
		{"none", requestParams{}, "", "invalid_payload", "exactly one of"},
		{"a null campaign is none", requestParams{Campaign: json.RawMessage("null")}, "", "invalid_payload", "exactly one of"},
		{"product and coin", requestParams{Product: product, Coin: coin}, "", "invalid_payload", "exactly one of"},
		{"a campaign reward is not served", requestParams{Campaign: json.RawMessage(`{"id":"camp_1"}`)}, "", "feature_not_available", "CAMPAIGN rewards"},
		{"a campaign and a product", requestParams{Campaign: json.RawMessage(`{"id":"camp_1"}`), Product: product}, "", "invalid_payload", "exactly one of"},
		{"a blank product id", requestParams{Product: &Product{ID: "  "}}, "", "invalid_payload", "parameters.product.id"},
		{"a product id over 300", requestParams{Product: &Product{ID: strings.Repeat("p", 301)}}, "", "invalid_payload", "parameters.product.id"},
		{"an empty SKU id", requestParams{Product: &Product{ID: "prod_1", SKUID: sp("")}}, "", "invalid_payload", "parameters.product.sku_id"},
		{"no points in the ratio", requestParams{Coin: &CoinRatio{ExchangeRatio: 1}}, "", "invalid_payload", "points_ratio"},
		{"too many points in the ratio", requestParams{Coin: &CoinRatio{ExchangeRatio: 1, PointsRatio: 1_000_000_001}}, "", "invalid_payload", "points_ratio"},
		{"a zero exchange ratio", requestParams{Coin: &CoinRatio{PointsRatio: 10}}, "", "invalid_payload", "exchange_ratio"},
		{"a negative exchange ratio", requestParams{Coin: &CoinRatio{ExchangeRatio: -1, PointsRatio: 10}}, "", "invalid_payload", "exchange_ratio"},
		{"a NaN exchange ratio", requestParams{Coin: &CoinRatio{ExchangeRatio: math.NaN(), PointsRatio: 10}}, "", "invalid_payload", "exchange_ratio"},
		{"an infinite exchange ratio", requestParams{Coin: &CoinRatio{ExchangeRatio: math.Inf(1), PointsRatio: 10}}, "", "invalid_payload", "exchange_ratio"},
		{"an exchange ratio over 1e9", requestParams{Coin: &CoinRatio{ExchangeRatio: 1e9 + 1, PointsRatio: 10}}, "", "invalid_payload", "exchange_ratio"},
	} {
		t.Run(c.name, func(t *testing.T) {
			typ, params, err := c.p.check()
			if c.typ == "" {
				refusal(t, err, c.key, c.details)
				return
			}
			if err != nil || typ != c.typ || (params.Product == nil) == (params.Coin == nil) {
				t.Fatalf("%s %+v %v, want %s with one parameter", typ, params, err, c.typ)
			}
		})
	}
}

// stock is a count of units, 0 or more; null is unlimited; absent leaves
// the stored stock alone.
func TestStockIsACountOrUnlimited(t *testing.T) {
	for _, c := range []struct {
		raw   string
		want  int64 // -1: nil
		set   bool
		fails bool
	}{
		{"", -1, false, false},
		{"null", -1, true, false},
		{"0", 0, true, false},
		{"25", 25, true, false},
		{"-1", 0, true, true},
		{"1.5", 0, true, true},
		{`"5"`, 0, true, true},
		{"1e30", 0, true, true},
	} {
		t.Run("stock "+c.raw, func(t *testing.T) {
			v, set, err := stock(json.RawMessage(c.raw))
			if c.fails {
				refusal(t, err, "invalid_payload", "stock")
				return
			}
			got := int64(-1)
			if v != nil {
				got = *v
			}
			if err != nil || set != c.set || got != c.want {
				t.Fatalf("%d set %v (%v), want %d set %v", got, set, err, c.want, c.set)
			}
		})
	}
}

// A name is 1 to 200 characters (not bytes), not blank; attributes' texts
// are at most 2000 bytes.
func TestNamesAndAttributesHaveBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		ok   bool
		want string
	}{
		{"a name", checkName(sp("Mug")), true, ""},
		{"200 characters of two bytes each", checkName(sp(strings.Repeat("é", 200))), true, ""},
		{"no name", checkName(nil), false, "name is required"},
		{"a blank name", checkName(sp(" \t")), false, "name is required"},
		{"201 characters", checkName(sp(strings.Repeat("a", 201))), false, "name is required"},
		{"no attributes", checkAttributes(nil), true, ""},
		{"a description of 2000", checkAttributes(&Attributes{Description: sp(strings.Repeat("d", 2000))}), true, ""},
		{"a description of 2001", checkAttributes(&Attributes{Description: sp(strings.Repeat("d", 2001))}), false, "attributes.description"},
		{"an image URL of 2001", checkAttributes(&Attributes{ImageURL: sp(strings.Repeat("u", 2001))}), false, "attributes.image_url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.ok {
				if c.err != nil {
					t.Fatal(c.err)
				}
				return
			}
			refusal(t, c.err, "invalid_payload", c.want)
		})
	}
}

// A reward reads back in the reference's shape, metadata never null.
func TestARewardReadsBackInTheReferenceShape(t *testing.T) {
	b, err := json.Marshal(Reward{ID: "rew_1", Name: "Mug", Type: Material, Attrs: Attrs{Parameters: Parameters{Product: &Product{ID: "prod_1"}}}}.View())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"object":"reward"`, `"metadata":{}`, `"stock":null`, `"redeemed":0`, `"updated_at":null`,
		`"parameters":{"product":{"id":"prod_1","sku_id":null}}`, `"attributes":{"image_url":null,"description":null}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}
