package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tallyhq/tally/regional/campaigns"
)

// Window is when a voucher, a promotion tier or a campaign may be used
// (campaigns.Validity, all in UTC), with its check.
type Window campaigns.Validity

// Refusal is why a redeemable is inapplicable: the reference's error
// object, and the failure_code a FAILURE redemption records.
type Refusal struct {
	Code    int    `json:"code"`
	Key     string `json:"key"`
	Message string `json:"message"`
	Details string `json:"details"`
}

func refuse(key, message, details string) *Refusal {
	return &Refusal{Code: 400, Key: key, Message: message, Details: details}
}

// check says why w does not admit use at now, or nil; what names the
// object ("voucher", "campaign", "promotion tier") in the details.
func (w Window) check(now time.Time, what, id string) *Refusal {
	now = now.UTC()
	switch {
	case !w.Active:
		key := "voucher_disabled"
		if what != "voucher" {
			key = "campaign_disabled"
			if what == "promotion tier" {
				key = "promotion_inactive"
			}
		}
		return refuse(key, capital(what)+" is disabled", fmt.Sprintf("The %s %s is not active.", what, id))
	case w.StartDate != nil && now.Before(*w.StartDate):
		return refuse("voucher_not_active", capital(what)+" not active yet",
			fmt.Sprintf("The %s %s starts at %s.", what, id, w.StartDate.UTC().Format(time.RFC3339)))
	case w.ExpirationDate != nil && !now.Before(*w.ExpirationDate):
		return refuse("voucher_expired", capital(what)+" expired",
			fmt.Sprintf("The %s %s expired at %s.", what, id, w.ExpirationDate.UTC().Format(time.RFC3339)))
	case !campaigns.InWindow(w.ValidityTimeframe, w.ValidityDayOfWeek, w.ValidityHours, w.StartDate, now):
		return refuse("voucher_not_active", capital(what)+" not active now",
			fmt.Sprintf("The %s %s is outside its validity timeframe, days or hours.", what, id))
	}
	return nil
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
