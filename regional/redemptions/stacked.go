package redemptions

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/tiers"
)

// CardPayment is a loyalty card paying with one of its campaign's rewards
// inside a stacked validation or redemption (regional/engine): the card
// with its live campaign, its buckets when read for a redemption, the
// reward and its assignment to the card's campaign, and the points asked
// (reward.points, for a COIN reward).
type CardPayment struct {
	Card       loyalty.LockedCard
	Buckets    []loyalty.Bucket
	RewardID   string
	Reward     rewards.Reward
	HasReward  bool
	Assignment Assignment
	Assigned   bool
	Asked      *int64
}

// QueueCardPayment queues the reads of card code paying with reward
// rewardID into dst: under the card's lock and with its buckets when lock
// is set (a redemption), else without (a validation).
func (s *Service) QueueCardPayment(b *pgx.Batch, projectID, code, rewardID string, asked *int64, lock bool, dst *CardPayment) {
	dst.RewardID, dst.Asked = rewardID, asked
	var buckets *[]loyalty.Bucket
	if lock {
		buckets = &dst.Buckets
	}
	s.prog.QueueCard(b, projectID, code, lock, &dst.Card, buckets)
	rewards.QueueForRedemption(b, projectID, rewardID, lock, func(w rewards.Reward) { dst.Reward, dst.HasReward = w, true })
	db.QueueEach(b, scanAssignment, func(a Assignment) { dst.Assignment, dst.Assigned = a, true },
		`SELECT `+assignmentColumns+` FROM reward_assignments WHERE project_id = $1 AND campaign_id = `+
			loyalty.CardColumnKeyed("campaign_id", code)+` AND reward_id = $3`,
		projectID, code, rewardID)
}

// Check says why the card cannot pay with the reward now, as the error a
// loyalty redemption answers (the reward missing, not offered by the
// card's campaign, out of stock; points asked of a reward with a price;
// too few points), or nil.
func (p *CardPayment) Check() error {
	w := p.Reward
	switch {
	case !p.HasReward:
		return apierr.NotFound("reward", p.RewardID)
	case !p.Assigned:
		return apierr.New(http.StatusBadRequest, "reward_not_assigned", "Reward not assigned",
			fmt.Sprintf("Reward %s is not offered by campaign %s.", w.ID, p.Card.Campaign.Name))
	case w.Stock != nil && w.Redeemed >= *w.Stock:
		return outOfStock(w.ID)
	case w.Type == rewards.CampaignType && p.Card.HolderID == nil:
		return apierr.InvalidPayload(fmt.Sprintf("card %s is held by no customer: reward %s gives to the card's holder", p.Card.Code, w.ID))
	}
	if w.Type != rewards.Coin {
		if p.Asked != nil {
			return apierr.InvalidPayload("reward.points is for COIN rewards, which take as many points as asked; a " + w.Type + " reward has its price")
		}
		if pts := p.Price(); p.Card.Balance < pts {
			return loyalty.PointsExceeded(p.Card.Card, pts)
		}
		return nil
	}
	want := int64(1)
	if p.Asked != nil {
		want = *p.Asked
	}
	if p.Card.Balance < want {
		return loyalty.PointsExceeded(p.Card.Card, want)
	}
	return nil
}

// IsCoin says the reward pays for the order with points.
func (p *CardPayment) IsCoin() bool { return p.Reward.Type == rewards.Coin }

// Price is what a reward other than COIN costs the card: its assignment's
// points, as the holder's tier maps them.
func (p *CardPayment) Price() int64 {
	if p.Assignment.Points == nil {
		return 0
	}
	pts := *p.Assignment.Points
	if m, ok := tiers.Of(p.Card.Campaign.Tiers, p.Card.Balance).RewardMapping(p.Reward.ID); ok {
		pts = m.Apply(pts)
	}
	return pts
}

// Coin is a COIN reward paying up to due, what the order still costs: the
// points it takes (those asked, or else as many as pay due, and never
// more than pay it or than the card holds) and the amount they pay.
func (p *CardPayment) Coin(due int64) (points, paid int64) {
	if due <= 0 {
		return 0, 0
	}
	perUnit := coinPerUnit(p.Reward.Attrs.Parameters.Coin)
	need := max(1, int64(math.Ceil(float64(due)*perUnit)))
	points = min(need, p.Card.Balance)
	if p.Asked != nil {
		points = min(need, *p.Asked)
	}
	return points, min(due, int64(math.Floor(float64(points)/perUnit)))
}

// coinPerUnit is how many points an amount of one smallest currency unit
// is worth under c.
func coinPerUnit(c *rewards.CoinRatio) float64 {
	return float64(c.PointsRatio) / (c.ExchangeRatio * 100)
}

// CardTaking is what a stacked redemption's card paid, kept with the
// redemption so that its rollback gives the points back where they were.
type CardTaking struct {
	CardID     string   `json:"card_id"`
	RewardID   string   `json:"reward_id"`
	RewardName string   `json:"reward_name"`
	Points     int64    `json:"points"`
	Taken      []taking `json:"taken"`
	// Issued is what a CAMPAIGN reward gave, which the rollback takes
	// back; Given is how the redemption shows it (reward.voucher).
	Issued *issued `json:"issued,omitempty"`
	Given  any     `json:"-"`
}

// RewardRef is the reward object a stacked redemption of a card shows.
func (p *CardPayment) RewardRef() map[string]any {
	return rewardRef(p.Reward, p.Assignment.ID, tiers.Of(p.Card.Campaign.Tiers, p.Card.Balance))
}

// rewardRef is the reward object of a redemption: the reward, its
// assignment, the holder's tier when the points were spent, and what the
// reward hands over.
func rewardRef(w rewards.Reward, assignmentID string, tier *tiers.Tier) map[string]any {
	rw := w.View()
	ref := map[string]any{"id": w.ID, "name": w.Name, "object": "reward", "type": w.Type, "created_at": rw.CreatedAt,
		"updated_at": rw.UpdatedAt, "parameters": rw.Parameters, "metadata": rw.Metadata, "assignment_id": assignmentID,
		"loyalty_tier_id": nil, "voucher": nil, "product": nil, "sku": nil}
	if tier != nil {
		ref["loyalty_tier_id"] = tier.ID
	}
	if pr := w.Attrs.Parameters.Product; pr != nil {
		ref["product"] = map[string]any{"id": pr.ID, "object": "product"}
		if pr.SKUID != nil {
			ref["sku"] = map[string]any{"id": *pr.SKUID, "product_id": pr.ID, "object": "sku"}
		}
	}
	return ref
}

// QueuePay queues the card, read locked with its buckets, paying pts for
// its reward as redemption id (a stacked redemption's child): the points
// taken from its buckets, soonest-expiring first, and the POINTS_REDEMPTION
// entry with its notices (order, when not nil, is the entry's order). A
// CAMPAIGN reward gives what it gives in tx, the stack's transaction, as a
// redemption alone does (campaign.go), what it gives to locked already in
// code order with the stack (HeldTargets). The caller queues the reward's
// stock (QueueStock) last. It answers what the rollback needs.
func (s *Service) QueuePay(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID string, p *CardPayment, pts int64, id string,
	order map[string]any, now time.Time) (CardTaking, error) {
	l := s.prog.LedgerWrite(projectID, b, now)
	before := p.Buckets
	rest, err := l.Take(&p.Card.Card, loyalty.Redeemed, pts, p.Buckets)
	if err != nil {
		return CardTaking{}, err
	}
	p.Buckets = rest
	details := map[string]any{"redemption": map[string]any{"id": id}, "reward": map[string]any{"id": p.Reward.ID, "name": p.Reward.Name}}
	if order != nil {
		details["order"] = order
	}
	if err := record(ctx, l, &p.Card, loyalty.PointsRedemption, -pts, nil, details, now); err != nil {
		return CardTaking{}, err
	}
	k := CardTaking{CardID: p.Card.ID, RewardID: p.Reward.ID, RewardName: p.Reward.Name, Points: pts, Taken: takings(before, rest)}
	if p.Reward.Type == rewards.CampaignType {
		given, is, err := s.give(ctx, tx, l, projectID, p.Card, p.Reward, id, now)
		if err != nil {
			return CardTaking{}, err
		}
		k.Issued, k.Given = &is, given
	}
	l.Done()
	return k, nil
}

// QueueStock queues one more (or, delta -1, one less) standing redemption
// of each reward counted by cs (a payment's Reward.Count, a refund's
// Count), in reward id order, as every redemption and rollback writes
// them; a reward's stock refuses one past it (IsOutOfStock).
func QueueStock(b *pgx.Batch, projectID string, cs []rewards.Count, delta int) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].RewardID() < cs[j].RewardID() })
	for _, c := range cs {
		c.Queue(b, projectID, delta)
	}
}

// IsOutOfStock says err is a reward's stock refusing one more redemption,
// as rewards tells it.
func IsOutOfStock(err error) bool { return rewards.IsOutOfStock(err) }

// Refund gives back what a stacked redemption's card paid (k), as rollback
// rbID of redemption id, in tx: the card is locked, its points go back to
// the buckets they came from and POINTS_REFUND is recorded, queued onto
// b. The caller queues the reward's unit back to its stock with the Count
// answered (QueueStock), last and in reward id order, as a redemption
// does. It answers the card as the rollback left it.
func (s *Service) Refund(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID string, k CardTaking, id, rbID string,
	reason *string, order map[string]any, now time.Time) (loyalty.CardView, rewards.Count, error) {
	var card loyalty.LockedCard
	var count rewards.Count
	lb := &pgx.Batch{}
	s.prog.QueueLockCard(lb, loyalty.CardRef{Project: projectID, Member: k.CardID}, &card)
	rewards.QueueCount(lb, projectID, k.RewardID, &count)
	if err := tx.SendBatch(ctx, lb).Close(); err != nil {
		return loyalty.CardView{}, count, err
	}
	if !card.Found {
		return loyalty.CardView{}, count, apierr.New(http.StatusBadRequest, "voucher_not_found", "Voucher not found",
			fmt.Sprintf("The card of redemption %s, %s, or its campaign, was deleted; its points cannot be returned.", id, k.CardID))
	}
	l := s.prog.LedgerWrite(projectID, b, now)
	details := map[string]any{"redemption": map[string]any{"id": id}, "rollback": map[string]any{"id": rbID},
		"reward": map[string]any{"id": k.RewardID, "name": k.RewardName}}
	if order != nil {
		details["order"] = order
	}
	if err := giveBack(ctx, l, &card, k.Taken, k.Points, reason, details, now); err != nil {
		return loyalty.CardView{}, count, err
	}
	if k.Issued != nil {
		// Locked already in code order with the stack (GivenTargets).
		tb := maps.Clone(details)
		delete(tb, "balance") // the paying card's, which the target's entry replaces
		if err := s.takeBack(ctx, tx, l, projectID, *k.Issued, tb, now); err != nil {
			return loyalty.CardView{}, count, err
		}
	}
	l.Done()
	return card.View(card.Campaign), count, nil
}

// QueuePayingCards queues into b the read of the cards a customer holds
// (at most limit, with points, in live campaigns) whose campaign offers a
// COIN reward in stock, each ready to pay with it (the first such reward
// of its campaign), into out: qualifications' loyalty cards. holderSQL
// names the customer as vouchers.QueueHeldBy's does.
func (s *Service) QueuePayingCards(b *pgx.Batch, projectID, holderSQL string, holder any, limit int, out *[]CardPayment) {
	var cards []loyalty.LockedCard
	s.prog.QueueCardsHeldBy(b, projectID, holderSQL, holder, limit, &cards)
	b.Queue(`SELECT a.id, a.reward_id, a.campaign_id, a.points, a.created_at, a.updated_at, `+rewards.Columns+`
		FROM reward_assignments a`+rewards.JoinCoinsInStock("a")+`
		WHERE a.project_id = $1 AND a.campaign_id IN (SELECT c.campaign_id`+loyalty.HeldCardsFrom(holderSQL)+`)
		ORDER BY a.id`, projectID, holder).Query(func(rows pgx.Rows) error {
		coin := map[string]CardPayment{}
		for rows.Next() {
			var p CardPayment
			w := &p.Reward
			var attrs []byte
			a := &p.Assignment
			if err := rows.Scan(&a.ID, &a.RewardID, &a.CampaignID, &a.Points, &a.CreatedAt, &a.UpdatedAt,
				&w.ID, &w.Name, &w.Type, &attrs, &w.Stock, &w.Redeemed, &w.CreatedAt, &w.UpdatedAt); err != nil {
				return err
			}
			if err := json.Unmarshal(attrs, &w.Attrs); err != nil {
				return err
			}
			if _, ok := coin[a.CampaignID]; !ok {
				p.RewardID, p.HasReward, p.Assigned = w.ID, true, true
				coin[a.CampaignID] = p
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, c := range cards {
			if p, ok := coin[c.CampaignID]; ok {
				p.Card = c
				*out = append(*out, p)
			}
		}
		return nil
	})
}

// giveBack queues the points a redemption took going back to the buckets
// they came from (taken; any rest it did not record, undated) and the
// POINTS_REFUND entry with details, for a single or a stacked rollback.
func giveBack(ctx context.Context, l *loyalty.LedgerWrite, card *loyalty.LockedCard, taken []taking, points int64,
	reason *string, details map[string]any, now time.Time) error {
	back := int64(0)
	for _, tk := range taken {
		l.Add(&card.Card, loyalty.Refunded, tk.Points, tk.ExpiresOn)
		back += tk.Points
	}
	if back < points {
		l.Add(&card.Card, loyalty.Refunded, points-back, nil)
	}
	return record(ctx, l, card, loyalty.PointsRefund, points, reason, details, now)
}

// record queues a redemption's or a rollback's entry of delta points on
// card (already moved by l) of type typ, its details with the balance
// after it, and its notices.
func record(ctx context.Context, l *loyalty.LedgerWrite, card *loyalty.LockedCard, typ string, delta int64, reason *string,
	details map[string]any, now time.Time) error {
	bal := card.BalanceAfter(delta)
	bal.OperationType = "" // a person's or a redemption's, as the reference leaves it
	t := loyalty.Transaction{ID: ids.New("vtx_"), VoucherID: card.ID, CampaignID: card.CampaignID, Type: typ, Reason: reason,
		CreatedAt: jsonx.Time{Time: now}, Delta: delta}
	details["balance"] = bal
	t.Details, _ = json.Marshal(details)
	return l.Record(ctx, t, &card.Card, card.Campaign)
}
