package vouchers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Webhook event types of gift cards, as the reference names them.
const (
	EventGiftBalanceAdded       = "voucher.gift.balance_added"
	EventGiftTransactionCreated = "voucher.gift.transaction.created"
)

// Notifier raises webhook notices in the writer's transaction.
type Notifier interface {
	Queue(ctx context.Context, b *pgx.Batch, n webhooks.Notice) error
}

// BalanceRequest is the body of POST /v1/vouchers/{code}/balance: amount in
// cents, positive to add credits, negative to remove them.
type BalanceRequest struct {
	Amount   *int64  `json:"amount"`
	SourceID *string `json:"source_id"`
	Reason   *string `json:"reason"`
}

// Validate answers the 400 that says what is wrong with the request, if
// anything is: Amount is then set, not 0, and within ±maxCredits.
func (r BalanceRequest) Validate() error {
	if r.Amount == nil || *r.Amount == 0 {
		return apierr.InvalidPayload("amount is required and must not be 0: in cents, positive to add credits, negative to remove them")
	}
	if amt := *r.Amount; amt > maxCredits || amt < -maxCredits {
		return apierr.InvalidPayload(fmt.Sprintf("amount must be within ±%d", int64(maxCredits)))
	}
	if err := loyalty.CheckText("reason", r.Reason); err != nil {
		return err
	}
	return loyalty.CheckText("source_id", r.SourceID)
}

// Balance is the reference's balance object of a gift card.
type Balance struct {
	Amount        int64         `json:"amount"`
	Total         int64         `json:"total"`
	Balance       int64         `json:"balance"`
	Type          string        `json:"type"`
	OperationType string        `json:"operation_type"`
	Object        string        `json:"object"`
	RelatedObject RelatedObject `json:"related_object"`
}

// RelatedObject names the voucher a balance belongs to.
type RelatedObject struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// balanceAfter is the balance object of v's figures after a change of amount.
func balanceAfter(v Voucher, amount int64) Balance {
	g := v.Attrs.Gift
	return Balance{Amount: amount, Total: g.Amount - g.SubtractedAmount, Balance: g.Balance, Type: "gift_voucher",
		OperationType: "MANUAL", Object: "balance", RelatedObject: RelatedObject{ID: v.ID, Type: "voucher"}}
}

// GiftAmountExceeded is the reference's error for a gift card whose balance
// does not cover what is asked of it.
func GiftAmountExceeded(v Voucher, want int64) error {
	return apierr.New(http.StatusBadRequest, "gift_amount_exceeded", "Gift amount exceeded",
		fmt.Sprintf("Gift card %s has a balance of %d; %d cannot be taken from it.", v.Code, v.Attrs.Gift.Balance, want))
}

// maxCredits is the most credits a gift card holds: a billion in the
// currency, in cents. It bounds every amount that sets credits (a card's or
// a gift campaign template's gift.amount) and every balance change, one
// change and the balance it leaves alike.
const maxCredits = 100_000_000_000

// UpdateBalance adds credits to a gift card or removes them, writing
// CREDITS_ADDITION or CREDITS_REMOVAL with the card's new figures and the
// webhook notices in one transaction.
func (s *Service) UpdateBalance(ctx context.Context, projectID, code string, r BalanceRequest) (_ Balance, err error) {
	ctx, span := tracer.Start(ctx, "vouchers.UpdateBalance")
	defer telemetry.End(span, &err)
	if err := r.Validate(); err != nil {
		return Balance{}, err
	}
	amt := *r.Amount
	var out Balance
	// As the points ledger: READ COMMITTED under the voucher's row lock, so
	// writers of one card queue on the lock and each reads what the one
	// before it wrote; the locking read goes with BEGIN and the writes (the
	// figures, the entry, the notices) with COMMIT.
	err = db.InPipe(ctx, s.pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		var v Voucher
		var found bool
		b := &pgx.Batch{}
		queueLockVoucher(b, projectID, code, &v, &found)
		if err := p.Send(ctx, b).Close(); err != nil {
			return nil, err
		}
		if !found {
			return nil, apierr.NotFound("voucher", code)
		}
		if v.Type != Gift || v.Attrs.Gift == nil {
			return nil, apierr.InvalidPayload(fmt.Sprintf("voucher %s is a %s: only a GIFT_VOUCHER has a balance of credits", code, v.Type))
		}
		w := &pgx.Batch{}
		var err error
		out, _, err = s.queueCredit(ctx, w, projectID, &v, amt, r.SourceID, r.Reason, nil)
		if err != nil {
			return nil, err
		}
		return w, nil
	})
	return out, err
}

// queueCredit queues onto w the change of gift card v's credits by amt
// (positive: CREDITS_ADDITION, negative: CREDITS_REMOVAL, refused past the
// balance): its figures, the entry with details beside its balance, and
// the notices. v is locked by the caller and changed in place.
func (s *Service) queueCredit(ctx context.Context, w *pgx.Batch, projectID string, v *Voucher, amt int64, sourceID, reason *string,
	details map[string]any) (Balance, loyalty.Transaction, error) {
	now := s.now()
	g := v.Attrs.Gift
	t := loyalty.Transaction{ID: ids.New("vtx_"), VoucherID: v.ID, SourceID: sourceID, Reason: reason,
		Source: ptr("API"), CreatedAt: jsonx.Time{Time: now}, Delta: amt}
	if v.CampaignID != nil {
		t.CampaignID = *v.CampaignID
	}
	if amt > 0 {
		if g.Balance+amt > maxCredits {
			return Balance{}, t, apierr.InvalidPayload(fmt.Sprintf("amount: %d would take the balance of %s from %d past %d, the most a gift card holds",
				amt, v.Code, g.Balance, int64(maxCredits)))
		}
		g.Amount += amt
		t.Type = loyalty.CreditsAddition
	} else {
		if g.Balance < -amt {
			return Balance{}, t, GiftAmountExceeded(*v, -amt)
		}
		g.SubtractedAmount -= amt
		t.Type = loyalty.CreditsRemoval
	}
	g.Balance += amt
	v.UpdatedAt = &now
	out := balanceAfter(*v, amt)
	if details == nil {
		details = map[string]any{}
	}
	details["balance"] = out
	t.Details, _ = json.Marshal(details)
	if err := QueueAttrs(w, projectID, *v, now); err != nil {
		return Balance{}, t, err
	}
	loyalty.QueueEntry(w, projectID, t)
	if s.notify != nil {
		view := v.View()
		if err := s.notify.Queue(ctx, w, webhooks.Notice{Project: projectID, Type: EventGiftTransactionCreated, Entity: t.ID,
			Object: map[string]any{"transaction": t, "voucher": view}}); err != nil {
			return Balance{}, t, err
		}
		if amt > 0 {
			if err := s.notify.Queue(ctx, w, webhooks.Notice{Project: projectID, Type: EventGiftBalanceAdded, Entity: v.ID,
				Object: map[string]any{"voucher": view, "balance": out, "transaction": t}}); err != nil {
				return Balance{}, t, err
			}
		}
	}
	return out, t, nil
}

// Transactions returns a page of a voucher's transactions (gift cards'
// credits; a discount voucher has none).
func (s *Service) Transactions(ctx context.Context, projectID, code string, tq loyalty.TxQuery) ([]loyalty.Transaction, bool, string, error) {
	v, err := getVoucher(ctx, s.pool, projectID, code, false)
	if err != nil {
		return nil, false, "", err
	}
	return loyalty.ListEntries(ctx, s.pool, loyalty.CardRef{Project: projectID, Member: v.ID}, tq, s.now())
}

// openingDetails is the details of a new gift card's opening entry: its
// balance after the amount it was made with.
func openingDetails(v Voucher) []byte {
	b := balanceAfter(v, v.Attrs.Gift.Amount)
	b.OperationType = "AUTOMATIC"
	raw, _ := json.Marshal(map[string]any{"balance": b})
	return raw
}
