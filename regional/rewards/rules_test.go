package rewards

import (
	"encoding/json"
	"errors"
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

// A reward is of the kind its parameters name, exactly one of them; a
// COIN reward's ratios are numbers or strings holding them (the
// reference's request schema and the official SDKs send strings), a
// CAMPAIGN reward's kind is its campaign's type.
func TestParametersMakeTheRewardsKind(t *testing.T) {
	camps := map[string]string{"camp_d": DiscountCoupons, "camp_g": GiftVouchers, "camp_l": LoyaltyProgram, "camp_p": "PROMOTION"}
	lookup := func(id string) (string, string, error) {
		if typ, ok := camps[id]; ok {
			return id, typ, nil
		}
		return "", "", apierr.NotFound("campaign", id)
	}
	for _, c := range []struct {
		name    string
		p       string
		typ     string // "" when refused
		key     string
		details string
	}{
		{"a product is MATERIAL", `{"product":{"id":"prod_1"}}`, Material, "", ""},
		{"a product with its SKU", `{"product":{"id":"prod_1","sku_id":"sku_1"}}`, Material, "", ""},
		{"a coin ratio is COIN", `{"coin":{"exchange_ratio":1,"points_ratio":10}}`, Coin, "", ""},
		{"a coin ratio in strings", `{"coin":{"exchange_ratio":"0.5","points_ratio":"10"}}`, Coin, "", ""},
		{"a fractional exchange ratio", `{"coin":{"exchange_ratio":0.25,"points_ratio":1}}`, Coin, "", ""},
		{"the largest points ratio", `{"coin":{"exchange_ratio":1e9,"points_ratio":1000000000}}`, Coin, "", ""},
		{"a discount campaign", `{"campaign":{"id":"camp_d"}}`, CampaignType, "", ""},
		{"a gift campaign with credits", `{"campaign":{"id":"camp_g","balance":500}}`, CampaignType, "", ""},
		{"a loyalty program with points as a string", `{"campaign":{"id":"camp_l","balance":"25"}}`, CampaignType, "", ""},
		{"none", `{}`, "", "invalid_payload", "exactly one of"},
		{"a null campaign is none", `{"campaign":null}`, "", "invalid_payload", "exactly one of"},
		{"product and coin", `{"product":{"id":"p"},"coin":{"exchange_ratio":1,"points_ratio":10}}`, "", "invalid_payload", "exactly one of"},
		{"a campaign and a product", `{"campaign":{"id":"camp_d"},"product":{"id":"p"}}`, "", "invalid_payload", "exactly one of"},
		{"a campaign without id", `{"campaign":{}}`, "", "invalid_payload", "parameters.campaign.id"},
		{"an unknown campaign", `{"campaign":{"id":"camp_x"}}`, "", "not_found", ""},
		{"a promotion campaign", `{"campaign":{"id":"camp_p"}}`, "", "invalid_payload", "DISCOUNT_COUPONS, GIFT_VOUCHERS or LOYALTY_PROGRAM"},
		{"a discount with a balance", `{"campaign":{"id":"camp_d","balance":5}}`, "", "invalid_payload", "parameters.campaign.balance"},
		{"a gift campaign without credits", `{"campaign":{"id":"camp_g"}}`, "", "invalid_payload", "parameters.campaign.balance"},
		{"a loyalty program with 0 points", `{"campaign":{"id":"camp_l","balance":0}}`, "", "invalid_payload", "parameters.campaign.balance"},
		{"a blank product id", `{"product":{"id":"  "}}`, "", "invalid_payload", "parameters.product.id"},
		{"a product id over 300", `{"product":{"id":"` + strings.Repeat("p", 301) + `"}}`, "", "invalid_payload", "parameters.product.id"},
		{"an empty SKU id", `{"product":{"id":"prod_1","sku_id":""}}`, "", "invalid_payload", "parameters.product.sku_id"},
		{"no points in the ratio", `{"coin":{"exchange_ratio":1}}`, "", "invalid_payload", "points_ratio"},
		{"a fractional points ratio", `{"coin":{"exchange_ratio":1,"points_ratio":"1.5"}}`, "", "invalid_payload", "points_ratio"},
		{"too many points in the ratio", `{"coin":{"exchange_ratio":1,"points_ratio":1000000001}}`, "", "invalid_payload", "points_ratio"},
		{"a zero exchange ratio", `{"coin":{"points_ratio":10}}`, "", "invalid_payload", "exchange_ratio"},
		{"a negative exchange ratio", `{"coin":{"exchange_ratio":-1,"points_ratio":10}}`, "", "invalid_payload", "exchange_ratio"},
		{"an infinite exchange ratio", `{"coin":{"exchange_ratio":"1e400","points_ratio":10}}`, "", "invalid_payload", "exchange_ratio"},
		{"an exchange ratio over 1e9", `{"coin":{"exchange_ratio":1000000001,"points_ratio":10}}`, "", "invalid_payload", "exchange_ratio"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p requestParams
			if err := json.Unmarshal([]byte(c.p), &p); err != nil {
				t.Fatal(err)
			}
			typ, params, err := p.check(lookup)
			if c.typ == "" {
				if c.key == "not_found" {
					if e := (*apierr.Error)(nil); !errors.As(err, &e) || e.Status != 404 {
						t.Fatalf("%v, want a 404", err)
					}
					return
				}
				refusal(t, err, c.key, c.details)
				return
			}
			n := 0
			for _, ok := range []bool{params.Product != nil, params.Coin != nil, params.Campaign != nil} {
				if ok {
					n++
				}
			}
			if err != nil || typ != c.typ || n != 1 {
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
