package vouchers

import (
	"context"
	"errors"
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
