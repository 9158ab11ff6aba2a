package vouchers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/webhooks"
)

// What the validation and redemption engine (regional/engine) reads and
// writes of vouchers: the vouchers table stays this package's own.

// Found is a voucher read by QueueRead, and whether there was one.
type Found struct {
	Voucher
	Found bool
}

// QueueRead queues reading a live voucher by code (or else id) into dst,
// locked when lock is set (the batch must then open a transaction).
func QueueRead(b *pgx.Batch, projectID, codeOrID string, lock bool, dst *Found) {
	queueVoucher(b, projectID, codeOrID, lock, &dst.Voucher, &dst.Found)
}

// QueueReadToRedeem queues reading a live voucher by code (or else id)
// into dst for a redemption or a rollback: locked, unless it is a discount
// voucher. A discount voucher's redemption changes only its count, which
// QueueCount takes last, in a short conditional update, so that the
// redeemers of one public code do not take turns on its row for their
// whole transactions (docs/architecture.md, One hot code). A voucher's
// type never changes, so which of the two statements finds it is fixed.
func QueueReadToRedeem(b *pgx.Batch, projectID, codeOrID string, dst *Found) {
	queueVoucherWhere(b, projectID, codeOrID, ` AND v.type <> 'DISCOUNT_VOUCHER' FOR UPDATE OF v`, &dst.Voucher, &dst.Found)
	queueVoucherWhere(b, projectID, codeOrID, ` AND v.type = 'DISCOUNT_VOUCHER'`, &dst.Voucher, &dst.Found)
}

// Counted says whether v, read by QueueReadToRedeem, was read unlocked:
// its count must then go through QueueCount.
func Counted(v *Voucher) bool { return v.Type == Discount }

// ErrQuantityExceeded is QueueCount's refusal: the voucher's redemptions
// (and the sessions holding it) had reached its quantity by the time the
// count was taken. The transaction must roll back.
var ErrQuantityExceeded = errors.New("vouchers: redemption quantity exceeded")

// QueueCount counts n more redemptions of voucher id (n < 0 for a
// rollback, which gives the use back on the row, however it was counted:
// shards.go) without the caller holding it: one statement that locks the
// row, checks, when n > 0, that the count plus n plus held (the other
// sessions' reservations, read earlier in the transaction) stays within
// the quantity as it is now, and writes. The row stays locked only from
// here to the commit, so the caller queues this last but for rewards'
// stock (docs/architecture.md, Lock order). A refusal fails the statement
// in the database (db.QueueChange), and the batch with ErrQuantityExceeded.
func QueueCount(b *pgx.Batch, projectID, id string, n, held int64, now time.Time) {
	db.QueueChange(b, ErrQuantityExceeded, `UPDATE vouchers SET redeemed_quantity = redeemed_quantity + $3, updated_at = $4
		WHERE project_id = $1 AND id = $2 AND ($3 < 0 OR redemption_quantity IS NULL OR redeemed_quantity + $3 + $5 <= redemption_quantity)`,
		projectID, id, n, now, held)
}

// QueueRedeemed counts n more redemptions of voucher id (n < 0 for
// rollbacks), which the caller holds locked.
func QueueRedeemed(b *pgx.Batch, projectID, id string, n int64, now time.Time) {
	b.Queue(`UPDATE vouchers SET redeemed_quantity = redeemed_quantity + $3, updated_at = $4 WHERE project_id = $1 AND id = $2`,
		projectID, id, n, now)
}

// QueueCredits changes the credits of gift card v, which the caller holds
// locked, by delta: negative for a redemption (CREDITS_REDEMPTION), positive
// for a refund (CREDITS_REFUND) or an addition (CREDITS_ADDITION); its
// figures and ledger entry are queued, v is updated, and the entry answered.
func (s *Service) QueueCredits(ctx context.Context, b *pgx.Batch, projectID string, v *Voucher, delta int64, typ string,
	sourceID *string, now time.Time) (loyalty.Transaction, error) {
	g := *v.Attrs.Gift
	if delta > 0 && g.Balance+delta > maxCredits {
		// As for a balance change by hand: no later change could follow it.
		return loyalty.Transaction{}, apierr.InvalidPayload(fmt.Sprintf("%d credits would take the balance of %s from %d past %d, the most a gift card holds",
			delta, v.Code, g.Balance, int64(maxCredits)))
	}
	if delta < 0 {
		g.SubtractedAmount -= delta
	} else if typ == loyalty.CreditsAddition {
		g.Amount += delta // credits given (a referral's reward), not given back
	}
	g.Balance += delta
	v.Attrs.Gift = &g
	v.UpdatedAt = &now
	t := loyalty.Transaction{ID: ids.New("vtx_"), VoucherID: v.ID, SourceID: sourceID, Source: ptr("API"), Type: typ,
		CreatedAt: jsonx.Time{Time: now}, Delta: delta}
	if v.CampaignID != nil {
		t.CampaignID = *v.CampaignID
	}
	bal := balanceAfter(*v, delta)
	bal.OperationType = "AUTOMATIC" // a redemption's or a rollback's, not a person's
	t.Details, _ = json.Marshal(map[string]any{"balance": bal})
	if err := QueueAttrs(b, projectID, *v, now); err != nil {
		return t, err
	}
	loyalty.QueueEntry(b, projectID, t)
	if s.notify != nil {
		if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: EventGiftTransactionCreated, Entity: t.ID,
			Object: map[string]any{"transaction": t, "voucher": v.View()}}); err != nil {
			return t, err
		}
	}
	return t, nil
}

// QueueHeldBy queues into b the read of a customer's wallet into out: the live, active vouchers they hold, newest first,
// at most limit; holderSQL names them ("$2", holder, or customers.IDOf("$2")). Their attrs are shared (heldAttrs): read only.
func QueueHeldBy(b *pgx.Batch, projectID, holderSQL string, holder any, limit int, out *[]Voucher) {
	b.Queue(`SELECT `+voucherColumns+voucherFrom+`
		WHERE v.project_id = $1 AND v.holder_id = `+holderSQL+` AND v.bin_id IS NULL AND c.deleted_at IS NULL AND v.active
		ORDER BY v.id DESC LIMIT $3`, projectID, holder, limit).Query(func(rows pgx.Rows) (err error) {
		*out, err = db.Collect(func(r pgx.Row) (v Voucher, err error) {
			attrs, err := scanRow(r, &v)
			if c, ok := heldAttrs.Get(v.ID); err != nil || ok && bytes.Equal(c.raw, attrs) {
				v.Attrs = c.attrs
				return v, err
			}
			if err = json.Unmarshal(attrs, &v.Attrs); err == nil {
				heldAttrs.Add(v.ID, parsedAttrs{raw: attrs, attrs: v.Attrs})
			}
			return v, err
		})(rows, nil)
		return err
	})
}

// heldAttrs keeps the parsed attrs of wallets' vouchers for as long as the
// stored bytes are the same: a qualification reads a wallet of up to a
// thousand vouchers, and parsing them was most of its time.
var heldAttrs = func() *lru.Cache[string, parsedAttrs] {
	c, _ := lru.New[string, parsedAttrs](20_000)
	return c
}()

type parsedAttrs struct {
	raw   []byte
	attrs Attrs
}

// CodesOfIDs maps each of names that is the id of a voucher, and the code
// of none, to that voucher's code: the key a redemption locks it by when a
// request names it by id (docs/architecture.md, Lock order).
func CodesOfIDs(ctx context.Context, q db.Querier, projectID string, names []string) (map[string]string, error) {
	return db.Map(q.Query(ctx, `SELECT w.id, w.code FROM vouchers w WHERE w.project_id = $1 AND w.id = ANY($2::TEXT[])
		AND NOT EXISTS (SELECT 1 FROM vouchers c WHERE c.project_id = $1 AND c.code = w.id)`, projectID, names))
}
