package events

import (
	"encoding/json"

	"github.com/tallyhq/tally/regional/async"
)

// lockOrder is an accrual's Policy.LockOrder: its card's holder then the
// card, or its customer. Only those fields of the payload (an
// earning.CustomEvent) are decoded: the whole event, metadata and all,
// was, for every task the worker claimed, before its handler decoded it
// again.
func lockOrder(t async.Task) string {
	var ev struct {
		CustomerID string `json:"customer_id"`
		CardID     string `json:"card_id"`
		HolderID   string `json:"holder_id"`
	}
	_ = json.Unmarshal(t.Payload, &ev)
	if ev.CardID != "" {
		return ev.HolderID + "|" + ev.CardID
	}
	return ev.CustomerID
}
