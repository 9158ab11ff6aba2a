package program

import (
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/loyalty"
)

// A member's activity merges the ledger's page and the card events' page
// in the list's order: by instant, a ledger entry before a card event of
// the same instant (a tier change after the entry that caused it), then by
// id; the newest first when descending; at most the limit, with the cursor
// of the next page.
func TestMergePageOrdersBothSources(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	entry := func(id string, at time.Time) loyalty.Transaction {
		return loyalty.Transaction{ID: id, Type: loyalty.PointsAddition, CreatedAt: jsonx.Time{Time: at}, Details: []byte(`{}`)}
	}
	event := func(id string, at time.Time) loyalty.CardEvent {
		return loyalty.CardEvent{Key: loyalty.ActivityKey{At: at, Rank: loyalty.RankCardEvent, ID: id},
			Type: "customer.loyalty.tier.joined", Data: map[string]any{}}
	}
	// The entry vtx_b and the event evt_a are of one instant: the entry
	// comes first although its id sorts after the event's.
	entries := []loyalty.Transaction{entry("vtx_a", t0), entry("vtx_b", t0.Add(time.Second)), entry("vtx_c", t0.Add(3*time.Second))}
	events := []loyalty.CardEvent{event("evt_a", t0.Add(time.Second)), event("evt_b", t0.Add(2*time.Second))}
	for _, tc := range []struct {
		name string
		lq   listq.Query
		want string // the page's ids
		more bool
		next string
	}{
		{name: "ascending, whole", lq: listq.Query{Limit: 10}, want: "vtx_a vtx_b evt_a evt_b vtx_c"},
		{name: "ascending, a page", lq: listq.Query{Limit: 3}, want: "vtx_a vtx_b evt_a", more: true, next: "evt_a"},
		{name: "descending, whole", lq: listq.Query{Limit: 10, Desc: true}, want: "vtx_c evt_b evt_a vtx_b vtx_a"},
		{name: "descending, a page", lq: listq.Query{Limit: 2, Desc: true}, want: "vtx_c evt_b", more: true, next: "evt_b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, more, next := mergePage(loyalty.Card{ID: "v_1"}, loyalty.Campaign{}, entries, events, tc.lq)
			var got []string
			for _, a := range page {
				got = append(got, a.ID)
			}
			if g := strings.Join(got, " "); g != tc.want || more != tc.more || (tc.more && next != tc.next) {
				t.Errorf("got %q more %v next %q, want %q more %v next %q", g, more, next, tc.want, tc.more, tc.next)
			}
		})
	}
	// Each activity is typed by its source: the ledger entry by the
	// reference's type of its transaction, the event by its own.
	page, _, _ := mergePage(loyalty.Card{ID: "v_1"}, loyalty.Campaign{}, entries[:1], events[:1], listq.Query{Limit: 10})
	if page[0].Type != "customer.voucher.loyalty_card.points_added" || page[1].Type != "customer.loyalty.tier.joined" {
		t.Errorf("types %q, %q", page[0].Type, page[1].Type)
	}
}
