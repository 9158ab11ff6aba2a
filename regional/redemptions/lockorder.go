package redemptions

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/vouchers"
)

// A CAMPAIGN reward writes a second voucher or card beside the paying
// card, and the documented lock order takes vouchers and cards together by
// code (docs/architecture.md, Lock order). So before the paying card is
// locked, the one the reward gives to is locked first when the member
// already holds it and its code sorts before the paying card's; give and
// takeBack lock it again later in the transaction, which waits for
// nothing. A voucher or card published in the transaction is new: no one
// else holds its lock.

// target is the voucher or card a CAMPAIGN reward gives to (or gave to).
type target struct {
	kind     string // the campaign type: rewards.DiscountCoupons, GiftVouchers or LoyaltyProgram
	id, code string // "" when the member holds none yet
}

// heldTarget is what reward campaign c would give to holder, when they
// hold it already. A new discount voucher is always a fresh one.
func heldTarget(ctx context.Context, tx db.Querier, projectID string, c *rewards.CampaignReward, holder string) (target, error) {
	t, at := target{kind: c.Type}, campaigns.HolderRef{Project: projectID, Campaign: c.ID, Customer: holder}
	var err error
	switch c.Type {
	case rewards.GiftVouchers:
		t.id, t.code, err = vouchers.HeldGiftCardKey(ctx, tx, at)
	case rewards.LoyaltyProgram:
		t.id, t.code, err = loyalty.HeldCardKey(ctx, tx, at)
	}
	return t, err
}

// gaveTarget is the voucher or card a redemption's issued names, with its
// code ("" when it is gone).
func gaveTarget(ctx context.Context, tx pgx.Tx, projectID string, is issued) (target, error) {
	codesOf := vouchers.CodesOfIDs
	if is.Type == rewards.LoyaltyProgram {
		codesOf = loyalty.CardCodesOfIDs
	}
	codes, err := codesOf(ctx, tx, projectID, []string{is.VoucherID})
	if err != nil {
		return target{}, err
	}
	if codes[is.VoucherID] == "" {
		return target{kind: is.Type}, nil
	}
	return target{kind: is.Type, id: is.VoucherID, code: codes[is.VoucherID]}, nil
}

// lockBefore locks t in tx when its code sorts before payCode, the paying
// card's.
func (s *Service) lockBefore(ctx context.Context, tx pgx.Tx, projectID string, t target, payCode string) error {
	if t.id == "" || t.code >= payCode {
		return nil
	}
	if t.kind == rewards.LoyaltyProgram {
		_, err := s.prog.LockCard(ctx, sendIn(ctx, tx), loyalty.CardRef{Project: projectID, Member: t.id}, nil)
		return err
	}
	_, err := s.vouchers.LockIn(ctx, tx, projectID, t.id)
	return err
}

// lockGivenFirst locks what a CAMPAIGN reward's redemption gave (gave, its
// issued column) before the paying card cardID when its code sorts first.
func (s *Service) lockGivenFirst(ctx context.Context, tx pgx.Tx, projectID, cardID string, gave []byte) error {
	var is issued
	if err := json.Unmarshal(gave, &is); err != nil {
		return err
	}
	t, err := gaveTarget(ctx, tx, projectID, is)
	if err != nil || t.id == "" {
		return err
	}
	codes, err := loyalty.CardCodesOfIDs(ctx, tx, projectID, []string{cardID})
	if err != nil || codes[cardID] == "" {
		return err // the card is gone: rollbackIn says so
	}
	return s.lockBefore(ctx, tx, projectID, t, codes[cardID])
}

// Target is what a CAMPAIGN reward paid for in a stacked redemption gives
// to and its member holds already (a gift card or a card of another
// program), or what one gave: the engine locks it by its code among the
// stack's vouchers and cards (QueueLockTarget), so that give and takeBack,
// which lock it again, wait for nothing.
type Target struct {
	Code string
	t    target
}

// HeldTargets reads, without locks, what each card of codes paying with
// the reward of the same index would give to, when its holder holds it
// already: one read of the rewards, and the holder and target only for
// CAMPAIGN rewards.
func (s *Service) HeldTargets(ctx context.Context, q db.Querier, projectID string, codes, rewardIDs []string) ([]Target, error) {
	ws, err := rewards.ByIDs(ctx, q, projectID, rewardIDs)
	if err != nil {
		return nil, err
	}
	var out []Target
	for i, code := range codes {
		w, ok := ws[rewardIDs[i]]
		c := w.Attrs.Parameters.Campaign
		if !ok || w.Type != rewards.CampaignType || c == nil || c.Type == rewards.DiscountCoupons {
			continue
		}
		holder, err := s.prog.HolderOf(ctx, loyalty.CardRef{Project: projectID, Member: code})
		if err != nil || holder == nil {
			continue // Check refuses the card without a holder, or unknown
		}
		t, err := heldTarget(ctx, q, projectID, c, *holder)
		if err != nil {
			return nil, err
		}
		if t.id != "" {
			out = append(out, Target{Code: t.code, t: t})
		}
	}
	return out, nil
}

// GivenTargets are what the CAMPAIGN rewards of ks gave, still there, for
// a stacked rollback to lock in code order with its children.
func (s *Service) GivenTargets(ctx context.Context, tx pgx.Tx, projectID string, ks []CardTaking) ([]Target, error) {
	var out []Target
	for _, k := range ks {
		if k.Issued == nil {
			continue
		}
		t, err := gaveTarget(ctx, tx, projectID, *k.Issued)
		if err != nil {
			return nil, err
		}
		if t.id != "" {
			out = append(out, Target{Code: t.code, t: t})
		}
	}
	return out, nil
}

// QueueLockTarget queues onto b the lock of t.
func (s *Service) QueueLockTarget(b *pgx.Batch, projectID string, t Target) {
	if t.t.kind == rewards.LoyaltyProgram {
		s.prog.QueueLockCard(b, loyalty.CardRef{Project: projectID, Member: t.t.id}, new(loyalty.LockedCard))
		return
	}
	vouchers.QueueRead(b, projectID, t.t.id, true, new(vouchers.Found))
}

// QueueLockCardByID queues onto b the lock of the card with id: a stacked
// rollback's child, locked among the targets by code (GivenTargets).
func (s *Service) QueueLockCardByID(b *pgx.Batch, projectID, id string) {
	s.prog.QueueLockCard(b, loyalty.CardRef{Project: projectID, Member: id}, new(loyalty.LockedCard))
}
