package campaign

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/vouchers"
)

// A voucher campaign's request is checked before anything is written: the
// campaign type decides the template's voucher type, and what the type
// needs (a discount, a gift, a referral program) is required of it; each
// refusal is a 400 that says what is wrong.
func TestACampaignRequestMakesTheTemplateItsTypeSays(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	discount := `"voucher":{"discount":{"type":"AMOUNT","amount_off":500}}`
	for _, tc := range []struct {
		name, body string
		referral   bool
		refused    string // a part of the 400's details; "" for none
		vtype      string
	}{
		{"discount", `{"name":"d","campaign_type":"DISCOUNT_COUPONS",` + discount + `}`, false, "", vouchers.Discount},
		{"gift", `{"name":"g","campaign_type":"GIFT_VOUCHERS","voucher":{"gift":{"amount":1000}}}`, false, "", vouchers.Gift},
		{"referral", `{"name":"r","campaign_type":"REFERRAL_PROGRAM",` + discount + `}`, true, "", vouchers.Discount},
		{"no name", `{"campaign_type":"DISCOUNT_COUPONS",` + discount + `}`, false, "name is required", ""},
		{"no type", `{"name":"d",` + discount + `}`, false, "campaign_type must be", ""},
		{"another type", `{"name":"d","campaign_type":"PROMOTION",` + discount + `}`, false, "campaign_type must be", ""},
		{"no voucher", `{"name":"d","campaign_type":"DISCOUNT_COUPONS"}`, false, "voucher is required", ""},
		{"no discount", `{"name":"d","campaign_type":"DISCOUNT_COUPONS","voucher":{}}`, false, "voucher.discount is required", ""},
		{"no gift", `{"name":"g","campaign_type":"GIFT_VOUCHERS","voucher":{}}`, false, "voucher.gift is required", ""},
		{"voucher of another type", `{"name":"d","campaign_type":"DISCOUNT_COUPONS","voucher":{"type":"GIFT_VOUCHER","gift":{"amount":1}}}`,
			false, "voucher.type must be DISCOUNT_VOUCHER", ""},
		{"referral without its program", `{"name":"r","campaign_type":"REFERRAL_PROGRAM",` + discount + `}`, false, "referral_program is required", ""},
		{"long description", `{"name":"d","campaign_type":"DISCOUNT_COUPONS","description":"` + strings.Repeat("x", 1001) + `",` + discount + `}`,
			false, "description is at most 1000", ""},
		{"bad quantity", `{"name":"d","campaign_type":"DISCOUNT_COUPONS","voucher":{"discount":{"type":"AMOUNT","amount_off":5},"redemption":{"quantity":0}}}`,
			false, "voucher.redemption.quantity", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			if err := json.Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			if tc.referral {
				r.ReferralProgram = json.RawMessage(`{"conversion_event_type":"redemption"}`)
			}
			c, err := r.campaign(now)
			if tc.refused != "" {
				ae := apierr.From(err)
				if err == nil || ae.Status != 400 || !strings.Contains(ae.Details, tc.refused) {
					t.Fatalf("answered %v, want a 400 saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Attrs.Voucher.Type != tc.vtype || c.Attrs.Voucher.IsReferralCode != tc.referral || !c.CreatedAt.Equal(now) {
				t.Fatalf("template %+v made at %v", c.Attrs.Voucher, c.CreatedAt)
			}
		})
	}
}

// A template update changes only what the campaign's vouchers have: a
// discount for discount vouchers, a gift for gift cards.
func TestATemplateUpdateKeepsToTheVoucherType(t *testing.T) {
	gift := vouchers.Template{Type: vouchers.Gift, Gift: &vouchers.GiftFigures{Amount: 100, Balance: 100}}
	if err := (TemplateUpdate{Discount: json.RawMessage(`{"type":"AMOUNT","amount_off":5}`)}).Apply(&gift); err == nil {
		t.Fatal("a discount was put on a gift card campaign's template")
	}
	if err := (TemplateUpdate{Gift: json.RawMessage(`{"amount":2500}`)}).Apply(&gift); err != nil || gift.Gift.Amount != 2500 {
		t.Fatalf("gift update: %v, %+v", err, gift.Gift)
	}
	discount := vouchers.Template{Type: vouchers.Discount}
	if err := (TemplateUpdate{Gift: json.RawMessage(`{"amount":1}`)}).Apply(&discount); err == nil {
		t.Fatal("a gift was put on a discount campaign's template")
	}
}

// Adding vouchers to a campaign is checked before anything is read: one to
// a million vouchers, and a code only for one voucher; each refusal is a
// 400 that names vouchers_count.
func TestAnAddRequestRefusesWhatItCannotMake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a       AddRequest
		refused string
	}{
		{"one", AddRequest{Campaign: "camp", Count: 1}, ""},
		{"one with its code", AddRequest{Campaign: "camp", Code: "SUMMER", Count: 1}, ""},
		{"a million", AddRequest{Campaign: "camp", Count: maxVouchers}, ""},
		{"none", AddRequest{Campaign: "camp"}, "vouchers_count: must be from 1 to"},
		{"negative", AddRequest{Campaign: "camp", Count: -1}, "vouchers_count: must be from 1 to"},
		{"over a million", AddRequest{Campaign: "camp", Count: maxVouchers + 1}, "vouchers_count: must be from 1 to"},
		{"a code for two", AddRequest{Campaign: "camp", Code: "SUMMER", Count: 2}, "a voucher with a given code is one voucher"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Validate()
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused with %v", err)
				}
				return
			}
			if ae := apierr.From(err); err == nil || ae.Status != 400 || !strings.Contains(ae.Details, tc.refused) {
				t.Fatalf("answered %v, want a 400 saying %q", err, tc.refused)
			}
		})
	}
}
