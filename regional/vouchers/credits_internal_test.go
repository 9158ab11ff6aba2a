package vouchers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/loyalty"
)

// Credits added by the engine (a referral's gift-card reward) are held to
// the most a gift card holds, as a balance change by hand is: past it no
// later change could follow. Giving back what a redemption took never
// passes it.
func TestQueuedCreditsStopAtTheMostACardHolds(t *testing.T) {
	s := &Service{}
	card := func(balance int64) *Voucher {
		return &Voucher{ID: "v_1", Code: "GIFT", Attrs: Attrs{Gift: &GiftFigures{Amount: balance, Balance: balance}}}
	}
	now := time.Now()
	_, err := s.QueueCredits(context.Background(), &pgx.Batch{}, "proj_1", card(maxCredits-10), 11, loyalty.CreditsAddition, nil, now)
	var e *apierr.Error
	if !errors.As(err, &e) || e.Status != 400 {
		t.Fatalf("11 credits onto a card 10 short of the most: %v, want a 400", err)
	}
	b := &pgx.Batch{}
	if _, err := s.QueueCredits(context.Background(), b, "proj_1", card(maxCredits-10), 10, loyalty.CreditsAddition, nil, now); err != nil || b.Len() == 0 {
		t.Fatalf("10 credits onto a card 10 short of the most: %v", err)
	}
}

// A gift card's balance request checks itself: a non-zero amount within
// what a card holds, and texts of at most 1000 characters.
func TestGiftBalanceRequestValidate(t *testing.T) {
	amount := func(n int64) *int64 { return &n }
	long := string(make([]byte, 1001))
	for _, tc := range []struct {
		name string
		r    BalanceRequest
		err  string
	}{
		{name: "add", r: BalanceRequest{Amount: amount(100)}},
		{name: "remove the most", r: BalanceRequest{Amount: amount(-maxCredits)}},
		{name: "no amount", r: BalanceRequest{}, err: "amount is required"},
		{name: "zero", r: BalanceRequest{Amount: amount(0)}, err: "amount is required"},
		{name: "past the most", r: BalanceRequest{Amount: amount(maxCredits + 1)}, err: "amount must be within"},
		{name: "reason too long", r: BalanceRequest{Amount: amount(1), Reason: &long}, err: "reason is at most"},
		{name: "source_id too long", r: BalanceRequest{Amount: amount(1), SourceID: &long}, err: "source_id is at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Validate()
			var e *apierr.Error
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (!errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Details, tc.err)):
				t.Fatalf("want a 400 saying %q, got %v", tc.err, err)
			}
		})
	}
}
