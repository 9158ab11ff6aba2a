package events

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/earning"
)

// An accrual's lock order is its card's holder then the card, or its
// customer, read without decoding the event's metadata: a payload with
// 50 metadata properties costs a dozen allocations or so (406 when the
// whole event was decoded).
func TestAnAccrualsLockOrderDecodesOnlyWhatItNeeds(t *testing.T) {
	meta := map[string]any{}
	for i := range 50 {
		meta[fmt.Sprintf("p%d", i)] = map[string]any{"v": i, "s": "text"}
	}
	payload := func(ev earning.CustomEvent) async.Task {
		ev.Metadata, ev.CreatedAt = meta, time.Now()
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return async.Task{Payload: b}
	}
	card := payload(earning.CustomEvent{ID: "evcus_1", CustomerID: "cust_1", CardID: "card_1", HolderID: "cust_2"})
	cust := payload(earning.CustomEvent{ID: "evcus_2", CustomerID: "cust_1"})
	if got := lockOrder(card); got != "cust_2|card_1" {
		t.Errorf("a card's accrual orders as %q, want its holder then the card", got)
	}
	if got := lockOrder(cust); got != "cust_1" {
		t.Errorf("a customer's accrual orders as %q, want the customer", got)
	}
	if n := testing.AllocsPerRun(20, func() { lockOrder(card) }); n > 25 {
		t.Errorf("the lock order took %.0f allocations, want at most 25", n)
	}
}
