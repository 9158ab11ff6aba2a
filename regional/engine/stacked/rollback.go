package stacked

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/webhooks"
)

func alreadyRolledBack(id string) error {
	return apierr.New(http.StatusBadRequest, "already_rolled_back", "Already rolled back",
		fmt.Sprintf("Redemption %s has already been rolled back.", id))
}

// Rollback undoes successful stacked redemptions: a parent's every child
// (POST /v1/redemptions/{parentId}/rollbacks) or one child (POST
// /v1/redemptions/{id}/rollback), restoring the vouchers' counts and the
// gift credits (CREDITS_REFUND), in one transaction. A redemption is
// rolled back once; a parent is ROLLED_BACK when all its children are.
// errNotStacked says id is none of these (a loyalty redemption's).
func (s *Service) Rollback(ctx context.Context, projectID, id string, r redemptions.RollbackRequest, whole bool) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "stacked.Rollback")
	defer telemetry.End(span, &err)
	if err := s.Redemptions.CheckMetadata(ctx, projectID, r.Metadata); err != nil {
		return nil, err
	}
	var out map[string]any
	var refused *Redemption // a redemption whose rollback is refused
	defer func() {
		if refused != nil && err != nil && s.Notify != nil {
			err = errors.Join(err, s.rollbackFailed(ctx, projectID, *refused, r, err))
		}
	}()
	err = db.InTxReadCommitted(ctx, s.Pool, func(tx pgx.Tx) error {
		refused = nil
		x, parent, kids, err := lockFamily(ctx, tx, projectID, id)
		if errors.Is(err, db.ErrNotFound) {
			return errNotStacked
		}
		if err != nil {
			return err
		}
		targets := []Redemption{x}
		switch {
		case parent == nil && !whole:
			return apierr.InvalidPayload("redemption " + id + " is a stacked redemption's parent: roll it back with POST /v1/redemptions/" + id + "/rollbacks")
		case parent != nil && whole:
			return apierr.InvalidPayload("redemption " + id + " is one redeemable's: roll it back with POST /v1/redemptions/" + id + "/rollback, or its parent's with /rollbacks")
		case parent == nil:
			parent, targets = &x, kids
		}
		if x.Result != "SUCCESS" {
			refused = &x
			return apierr.InvalidPayload("redemption " + id + " failed: there is nothing to roll back")
		}
		if x.Status == "ROLLED_BACK" {
			refused = &x
			return alreadyRolledBack(id)
		}
		now := s.now()
		b := &pgx.Batch{}
		var views []any
		var stock []rewards.Count
		rolled := map[string]bool{}
		if err := s.lockGiven(ctx, tx, projectID, targets); err != nil {
			return err
		}
		// What the children hold (cards, vouchers) is locked in code order,
		// as a redemption locks it, and the rewards' stock last, in id order.
		for _, t := range byCode(targets) {
			if t.Status != "SUCCEEDED" {
				continue
			}
			v, reward, err := s.undo(ctx, tx, b, projectID, t, r, now)
			if err != nil {
				return err
			}
			if reward != nil {
				stock = append(stock, *reward)
			}
			rolled[t.ID] = true
			views = append(views, v)
		}
		redemptions.QueueStock(b, projectID, stock, -1)
		// The parent is rolled back when none of its children stands.
		standing := false
		for _, k := range kids {
			standing = standing || (k.Status == "SUCCEEDED" && !rolled[k.ID])
		}
		out = map[string]any{"rollbacks": views}
		if parent != nil && !standing {
			rb := ids.New("rr_")
			pv := rollbackView(rb, *parent, r, now, parent.Amount)
			markRolledBack(b, projectID, parent.ID)
			if err := queueRollback(b, projectID, rb, parent.ID, nil, pv, now); err != nil {
				return err
			}
			out["parent_rollback"] = pv
		}
		if !whole && len(views) == 1 {
			out = views[0].(map[string]any)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return out, err
}

// rollbackFailed raises redemption.rollback.failed for a refused rollback
// of x (refusal is the error answered), in a transaction of its own: the
// refused one wrote nothing. Its object is the rollback as it would have
// been, FAILURE with the refusal's key and details.
func (s *Service) rollbackFailed(ctx context.Context, projectID string, x Redemption, r redemptions.RollbackRequest, refusal error) error {
	var ae *apierr.Error
	if !errors.As(refusal, &ae) {
		return nil
	}
	rb := ids.New("rr_")
	v := rollbackView(rb, x, r, s.now(), 0)
	v["result"], v["status"], v["failure_code"], v["failure_message"] = "FAILURE", "FAILED", ae.Key, ae.Details
	return s.Notify.Emit(ctx, s.Pool, webhooks.Notice{Project: projectID, Type: EventRollbackFailed, Entity: rb,
		Object: map[string]any{"redemption_rollback": v}})
}

// byCode orders redemptions by the code of what they redeemed, the order
// in which a redemption locks vouchers and cards (the engine's resolve); those of
// promotion tiers, which lock nothing, come first.
func byCode(rs []Redemption) []Redemption {
	out := append([]Redemption(nil), rs...)
	code := func(x Redemption) string {
		if x.Code == nil {
			return ""
		}
		return *x.Code
	}
	sort.SliceStable(out, func(i, j int) bool { return code(out[i]) < code(out[j]) })
	return out
}

// undo queues rolling back one child redemption: its voucher's count and
// credits, or its card's points, its status, and its rollback record,
// answered; reward counts the unit that goes back to its reward's stock
// (the caller queues that last).
func (s *Service) undo(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID string, t Redemption, r redemptions.RollbackRequest,
	now time.Time) (_ map[string]any, reward *rewards.Count, _ error) {
	rb := ids.New("rr_")
	v := rollbackView(rb, t, r, now, t.Amount)
	if k := t.CardPayment; k != nil {
		var ref map[string]any
		if t.OrderID != nil {
			ref = map[string]any{"id": *t.OrderID}
			if o, ok := t.View["order"].(map[string]any); ok {
				ref["source_id"] = o["source_id"]
			}
		}
		card, count, err := s.Redemptions.Refund(ctx, tx, b, projectID, *k, t.ID, rb, r.Reason, ref, now)
		if err != nil {
			return nil, nil, err
		}
		reward = &count
		v["voucher"], v["reward"], v["loyalty_card"] = card, t.View["reward"], map[string]any{"points": k.Points}
	} else if t.ObjectType == "voucher" && t.ObjectID != nil {
		// A discount voucher is read unlocked and its count given back in
		// the last batch, as a redemption takes it (vouchers.QueueCount):
		// locked here, in code order, it would be held before the gift
		// cards and cards after it, which a redemption locks before
		// counting it.
		var f vouchers.Found
		lb := &pgx.Batch{}
		vouchers.QueueReadToRedeem(lb, projectID, *t.ObjectID, &f)
		if err := tx.SendBatch(ctx, lb).Close(); err != nil {
			return nil, nil, err
		}
		if f.Found {
			if vouchers.Counted(&f.Voucher) {
				vouchers.QueueCount(b, projectID, f.ID, -1, 0, now)
			} else {
				vouchers.QueueRedeemed(b, projectID, f.ID, -1, now)
			}
			f.Redeemed--
			if t.GiftAmount > 0 && f.Attrs.Gift != nil {
				if _, err := s.Vouchers.QueueCredits(ctx, b, projectID, &f.Voucher, t.GiftAmount, loyalty.CreditsRefund, &rb, now); err != nil {
					return nil, nil, err
				}
				v["gift"] = map[string]any{"amount": t.GiftAmount}
			}
			v["voucher"] = f.View()
		}
	}
	markRolledBack(b, projectID, t.ID)
	if s.Notify != nil {
		if err := s.Notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: EventRollbackSucceeded, Entity: rb,
			Object: map[string]any{"redemption_rollback": v}}); err != nil {
			return nil, nil, err
		}
	}
	return v, reward, queueRollback(b, projectID, rb, t.ID, t.ParentID, v, now)
}

func rollbackView(id string, x Redemption, r redemptions.RollbackRequest, now time.Time, amount int64) map[string]any {
	meta := r.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	v := map[string]any{"id": id, "object": "redemption_rollback", "date": jsonx.Time{Time: now}, "customer_id": x.CustomerID,
		"tracking_id": x.TrackingID, "metadata": meta, "amount": -amount, "redemption": x.ID, "reason": r.Reason,
		"result": "SUCCESS", "status": "SUCCEEDED", "related_object_type": x.ObjectType, "related_object_id": x.ObjectID,
		"order": x.View["order"], "customer": x.View["customer"], "channel": x.View["channel"]}
	if x.ObjectType == "redemption" {
		v["related_object_id"] = x.ID
	}
	return v
}

// lockGiven locks, when CAMPAIGN rewards of rs gave to a voucher or card
// still there, those and what rs redeemed together by code, as the
// redemption locked them (engine.heldTargets), before undo locks each
// again, waiting for nothing: the rollback takes back what was given
// after the paying card, which may sort either side of it.
func (s *Service) lockGiven(ctx context.Context, tx pgx.Tx, projectID string, rs []Redemption) error {
	var ks []redemptions.CardTaking
	for _, t := range rs {
		if t.Status == "SUCCEEDED" && t.CardPayment != nil && t.CardPayment.Issued != nil {
			ks = append(ks, *t.CardPayment)
		}
	}
	if len(ks) == 0 {
		return nil
	}
	given, err := s.Redemptions.GivenTargets(ctx, tx, projectID, ks)
	if err != nil || len(given) == 0 {
		return err
	}
	type lock struct {
		code  string
		queue func(b *pgx.Batch)
	}
	var locks []lock
	for _, t := range rs {
		switch {
		case t.Status != "SUCCEEDED" || t.Code == nil:
		case t.CardPayment != nil:
			id := t.CardPayment.CardID
			locks = append(locks, lock{*t.Code, func(b *pgx.Batch) { s.Redemptions.QueueLockCardByID(b, projectID, id) }})
		case t.ObjectType == "voucher" && t.ObjectID != nil:
			id := *t.ObjectID
			locks = append(locks, lock{*t.Code, func(b *pgx.Batch) { vouchers.QueueRead(b, projectID, id, true, new(vouchers.Found)) }})
		}
	}
	for _, g := range given {
		locks = append(locks, lock{g.Code, func(b *pgx.Batch) { s.Redemptions.QueueLockTarget(b, projectID, g) }})
	}
	sort.SliceStable(locks, func(i, j int) bool { return locks[i].code < locks[j].code })
	b := &pgx.Batch{}
	for _, l := range locks {
		l.queue(b)
	}
	return tx.SendBatch(ctx, b).Close()
}
