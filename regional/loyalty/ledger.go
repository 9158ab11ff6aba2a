package loyalty

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/tiers"
	"github.com/tallyhq/tally/regional/webhooks"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
)

// BalanceRequest is the body of POST …/members/{memberId}/balance: positive
// points are added, negative ones removed.
type BalanceRequest struct {
	Points         *int64  `json:"points"`
	ExpirationType *string `json:"expiration_type"`
	ExpirationDate *string `json:"expiration_date"`
	Reason         *string `json:"reason"`
	SourceID       *string `json:"source_id"`
}

// BalanceChange is a BalanceRequest checked: Points is never 0, and
// Expiry, for added points, is how they expire.
type BalanceChange struct {
	Points           int64
	Reason, SourceID *string
	// ByProgram: the program's rules date the points; else Custom does
	// (nil: they never expire).
	ByProgram bool
	Custom    *time.Time
}

// Validate checks the request at now (a custom expiration date must be
// later) and answers the change it asks for, or the 400 that says what is
// wrong.
func (r BalanceRequest) Validate(now time.Time) (BalanceChange, error) {
	if r.Points == nil || *r.Points == 0 {
		return BalanceChange{}, apierr.InvalidPayload("points is required and must not be 0: positive to add, negative to remove")
	}
	c := BalanceChange{Points: *r.Points, Reason: r.Reason, SourceID: r.SourceID}
	if c.Points > 1_000_000_000 || c.Points < -1_000_000_000 {
		return BalanceChange{}, apierr.InvalidPayload("points must be within ±1000000000")
	}
	if err := CheckText("reason", r.Reason); err != nil {
		return BalanceChange{}, err
	}
	if err := CheckText("source_id", r.SourceID); err != nil {
		return BalanceChange{}, err
	}
	expType := "PROGRAM_RULES"
	if r.ExpirationType != nil {
		expType = *r.ExpirationType
	}
	switch expType {
	case "PROGRAM_RULES", "NON_EXPIRING":
		if r.ExpirationDate != nil {
			return BalanceChange{}, apierr.InvalidPayload("expiration_date goes with expiration_type CUSTOM_DATE")
		}
		c.ByProgram = expType == "PROGRAM_RULES"
	case "CUSTOM_DATE":
		if c.Points < 0 {
			return BalanceChange{}, apierr.InvalidPayload("an expiration applies to added points, not removed ones")
		}
		if r.ExpirationDate == nil {
			return BalanceChange{}, apierr.InvalidPayload("expiration_date (YYYY-MM-DD) is required with expiration_type CUSTOM_DATE")
		}
		d, err := parseDate(*r.ExpirationDate)
		if err != nil {
			return BalanceChange{}, apierr.InvalidPayload("expiration_date must be a date, YYYY-MM-DD")
		}
		if !d.After(now) {
			return BalanceChange{}, apierr.InvalidPayload("expiration_date must be in the future")
		}
		c.Custom = &d
	default:
		return BalanceChange{}, apierr.InvalidPayload("expiration_type must be PROGRAM_RULES, CUSTOM_DATE or NON_EXPIRING")
	}
	return c, nil
}

// UpdateBalance adds or removes points, writing POINTS_ADDITION or
// POINTS_REMOVAL with the card's new figures in one transaction.
func (s *Service) UpdateBalance(ctx context.Context, ref CardRef, r BalanceRequest) (_ Balance, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.UpdateBalance")
	defer telemetry.End(span, &err)
	change, err := r.Validate(s.Now())
	if err != nil {
		return Balance{}, err
	}
	pts, projectID := change.Points, ref.Project
	var out Balance
	// READ COMMITTED with the card's row lock: concurrent operations on one
	// card queue on the lock and each then reads what the one before it
	// wrote. Under SERIALIZABLE, PostgreSQL aborts every waiter that the
	// lock holder overtook, and a hot card starves its clients of retries.
	// Everything the operation reads that others write (the card, its
	// buckets) is read after the lock: two round trips in all, the locking
	// read with BEGIN and the writes with COMMIT.
	err = db.InPipe(ctx, s.pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		var buckets *[]Bucket
		if pts < 0 {
			buckets = new([]Bucket)
		}
		card, err := s.LockCard(ctx, func(b *pgx.Batch) error { return p.Send(ctx, b).Close() }, ref, buckets)
		if err != nil {
			return nil, err
		}
		camp := card.Campaign
		now := s.Now()
		t := Transaction{ID: ids.New("vtx_"), VoucherID: card.ID, CampaignID: card.CampaignID, SourceID: change.SourceID,
			Reason: change.Reason, Source: ptr("API"), CreatedAt: jsonx.Time{Time: now}, Delta: pts}
		w := &pgx.Batch{}
		l := s.LedgerWrite(projectID, w, now)
		if pts > 0 {
			exp := change.Custom
			if change.ByProgram {
				exp = camp.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(now)
			}
			l.Add(&card.Card, Earned, pts, exp)
			t.Type = PointsAddition
		} else {
			if card.Balance < -pts {
				return nil, PointsExceeded(card.Card, -pts)
			}
			if _, err := l.Take(&card.Card, Subtracted, -pts, *buckets); err != nil {
				return nil, err
			}
			t.Type = PointsRemoval
		}
		out = card.BalanceAfter(pts)
		t.Details, _ = json.Marshal(map[string]any{"balance": out})
		if err := l.Record(ctx, t, &card.Card, camp); err != nil {
			return nil, err
		}
		if pts > 0 {
			if err := s.notify.Queue(ctx, w, webhooks.Notice{Project: projectID, Type: EventPointsAdded, Entity: card.ID,
				Object: map[string]any{"voucher": card.View(camp), "balance": out, "transaction": t}}); err != nil {
				return nil, err
			}
		}
		return l.Done(), nil
	})
	return out, err
}

// LockCard locks and reads a card of a live campaign (and, when buckets is
// not nil, its buckets) with send, which runs one batch in the caller's
// transaction: by code, the way clients name cards, or else by id
// (cardIDOf). A card not found is its 404.
//
// also, when given, queues more reads into the same batch: of things found
// through the card whose code or id is key.
func (s *Service) LockCard(ctx context.Context, send func(*pgx.Batch) error, ref CardRef,
	buckets *[]Bucket, also ...func(b *pgx.Batch, key string)) (LockedCard, error) {
	var card LockedCard
	b := &pgx.Batch{}
	queueLockCard(b, s.attrs, ref, &card)
	if buckets != nil {
		queueBuckets(b, ref.Project, ref.Member, buckets)
	}
	for _, f := range also {
		f(b, ref.Member)
	}
	if err := send(b); err != nil {
		return card, err
	}
	if card.Found {
		return card, nil
	}
	return card, s.missingCard(ctx, ref)
}

// missingCard is the error for a card that queueLockCard did not find: its
// campaign's 404 when the path names a campaign that is not there, else
// the card's.
func (s *Service) missingCard(ctx context.Context, ref CardRef) error {
	if ref.Campaign != "" {
		if _, err := s.Campaign(ctx, s.pool, ref.Project, ref.Campaign); err != nil {
			return err
		}
	}
	return notFoundCard(ref.Member)
}

// record queues a ledger entry and its webhook notice, and the tier notices
// when the entry moved the card between its campaign's tiers, which it
// answers.
func (s *Service) record(ctx context.Context, b *pgx.Batch, projectID string, t Transaction, card Card, camp Campaign) ([]tierMove, error) {
	queueTransaction(b, projectID, t)
	if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: EventTransactionCreated, Entity: t.ID,
		Object: map[string]any{"transaction": t, "voucher": card.View(camp)}}); err != nil {
		return nil, err
	}
	return s.queueTierShift(ctx, b, projectID, card, camp, card.Balance-t.Delta)
}

// tierMove is a tier notice: its event, tier and previous tier.
type tierMove struct {
	event          string
	tier, previous *tiers.Tier
}

// queueTierShift queues the tier notices (tiers.Shift) of a card whose
// balance went from before to its present one, and answers them.
func (s *Service) queueTierShift(ctx context.Context, b *pgx.Batch, projectID string, card Card, camp Campaign, before int64) ([]tierMove, error) {
	holder := ""
	if card.HolderID != nil {
		holder = *card.HolderID
	}
	var moves []tierMove
	err := tiers.Shift(camp.Tiers, before, card.Balance, func(event string, t, previous *tiers.Tier) error {
		moves = append(moves, tierMove{event, t, previous})
		o := map[string]any{"loyalty_tier": t.View(), "customer": map[string]any{"id": holder, "object": "customer"},
			"campaign": map[string]any{"id": camp.ID, "name": camp.Name}, "voucher": card.View(camp)}
		act := map[string]any{"loyalty_tier": t.View()}
		if previous != nil {
			o["previous_loyalty_tier"] = previous.View()
			act = map[string]any{"loyalty_tier_from": previous.View(), "loyalty_tier_to": t.View()}
		}
		at := s.Now()
		if card.UpdatedAt != nil { // the write's instant (LedgerWrite.touch)
			at = *card.UpdatedAt
		}
		queueCardEvent(b, projectID, &card, event, act, at)
		return s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: event, Entity: card.ID, Object: o})
	})
	return moves, err
}

// TransferRequest is one source card of a transfer.
type TransferRequest struct {
	Code     string  `json:"code"`
	Points   int64   `json:"points"`
	Reason   *string `json:"reason"`
	SourceID *string `json:"source_id"`
}

// Transfers is the body of a transfer: its source cards.
type Transfers []TransferRequest

// Validate answers the 400 that says what is wrong with the body, if
// anything is.
func (rs Transfers) Validate() error {
	if len(rs) == 0 || len(rs) > 100 {
		return apierr.InvalidPayload("the body is a list of 1 to 100 source cards: [{\"code\": …, \"points\": …}]")
	}
	for i, r := range rs {
		if r.Code == "" {
			return apierr.InvalidPayload(fmt.Sprintf("[%d].code is required", i))
		}
		if r.Points <= 0 || r.Points > 1_000_000_000 {
			return apierr.InvalidPayload(fmt.Sprintf("[%d].points must be a positive number of points", i))
		}
		if err := CheckText(fmt.Sprintf("[%d].reason", i), r.Reason); err != nil {
			return err
		}
		if err := CheckText(fmt.Sprintf("[%d].source_id", i), r.SourceID); err != nil {
			return err
		}
	}
	return nil
}

// Transfer moves points from source cards to the member's card, all or
// nothing: POINTS_TRANSFER_OUT on each donor and POINTS_TRANSFER_IN on the
// receiver, each naming the other as its related transaction.
func (s *Service) Transfer(ctx context.Context, ref CardRef, rs Transfers) (_ CardView, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.Transfer")
	defer telemetry.End(span, &err)
	if err := rs.Validate(); err != nil {
		return CardView{}, err
	}
	projectID, campaignID, memberID := ref.Project, ref.Campaign, ref.Member
	var dest LockedCard
	// READ COMMITTED under the cards' row locks, as a balance change: two
	// round trips, the locking reads of every card with its campaign, tiers
	// and buckets with BEGIN, and every write with COMMIT. The cards are
	// locked in the order of the keys that name them (codes, as clients name
	// cards), so that transfers in opposite directions take them in one
	// order and cannot deadlock (a card named by id in one and by code in
	// the other may; the database's deadlock error retries the transaction).
	err = db.InPipe(ctx, s.pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		keys := []string{memberID}
		for _, r := range rs {
			keys = append(keys, r.Code)
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		locked := make([]LockedCard, len(keys))
		bks := make([][]Bucket, len(keys))
		b := &pgx.Batch{}
		for i, k := range keys {
			queueLockCard(b, s.attrs, CardRef{Project: projectID, Member: k}, &locked[i])
			queueBuckets(b, projectID, k, &bks[i])
		}
		if err := p.Send(ctx, b).Close(); err != nil {
			return nil, err
		}
		// Two keys may name one card (its code and its id): one copy of it.
		byKey, byID := map[string]*LockedCard{}, map[string]*LockedCard{}
		buckets := map[string][]Bucket{}
		for i, k := range keys {
			if !locked[i].Found {
				continue
			}
			if _, ok := byID[locked[i].ID]; !ok {
				byID[locked[i].ID] = &locked[i]
				buckets[locked[i].ID] = bks[i]
			}
			byKey[k] = byID[locked[i].ID]
		}
		find := func(key string) *LockedCard { return byKey[key] }
		d := find(memberID)
		if d == nil || (campaignID != "" && d.Campaign.ID != campaignID && d.Campaign.Name != campaignID) {
			return nil, s.missingCard(ctx, ref)
		}
		want := map[string]int64{} // by card id
		donors := make([]*LockedCard, len(rs))
		for i, r := range rs {
			c := find(r.Code)
			if c == nil {
				return nil, notFoundCard(r.Code)
			}
			if c.ID == d.ID {
				return nil, apierr.InvalidPayload(fmt.Sprintf("card %s cannot transfer points to itself", r.Code))
			}
			donors[i] = c
			want[c.ID] += r.Points
		}
		for _, c := range donors {
			if c.Balance < want[c.ID] {
				return nil, PointsExceeded(c.Card, want[c.ID])
			}
		}
		now := s.Now()
		exp := d.Campaign.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(now)
		l := s.LedgerWrite(projectID, &pgx.Batch{}, now)
		for i, r := range rs {
			donor := donors[i]
			rest, err := l.Take(&donor.Card, Subtracted, r.Points, buckets[donor.ID])
			if err != nil {
				return nil, err
			}
			buckets[donor.ID] = rest
			l.Add(&d.Card, Earned, r.Points, exp)
			outID, inID := ids.New("vtx_"), ids.New("vtx_")
			out := Transaction{ID: outID, VoucherID: donor.ID, CampaignID: donor.CampaignID, SourceID: r.SourceID, Reason: r.Reason,
				Source: ptr("API"), Type: PointsTransferOut, RelatedTransactionID: &inID, CreatedAt: jsonx.Time{Time: now}, Delta: -r.Points}
			out.Details, _ = json.Marshal(map[string]any{"balance": donor.BalanceAfter(-r.Points),
				"destination_voucher": d.simpleVoucher(d.Campaign)})
			in := Transaction{ID: inID, VoucherID: d.ID, CampaignID: d.CampaignID, SourceID: r.SourceID, Reason: r.Reason,
				Source: ptr("API"), Type: PointsTransferIn, RelatedTransactionID: &outID, CreatedAt: jsonx.Time{Time: now}, Delta: r.Points}
			in.Details, _ = json.Marshal(map[string]any{"balance": d.BalanceAfter(r.Points),
				"source_voucher": donor.simpleVoucher(donor.Campaign)})
			if err := l.Record(ctx, out, &donor.Card, donor.Campaign); err != nil {
				return nil, err
			}
			if err := l.Record(ctx, in, &d.Card, d.Campaign); err != nil {
				return nil, err
			}
		}
		dest = *d
		return l.Done(), nil
	})
	if err != nil {
		return CardView{}, err
	}
	return dest.View(dest.Campaign), nil
}

// ListTransactions returns a page of a card's transactions (memberID set)
// or of a campaign's.
func (s *Service) ListTransactions(ctx context.Context, ref CardRef, tq TxQuery) ([]Transaction, bool, string, error) {
	tq.Member, tq.Campaign = ref.Member, ref.Campaign
	ts, err := listTransactions(ctx, s.pool, ref.Project, tq, s.Now())
	if err != nil {
		return nil, false, "", err
	}
	if len(ts) == 0 { // an empty page, or no such card or campaign
		if ref.Member != "" {
			_, _, err = s.card(ctx, s.pool, ref, false)
		} else {
			_, err = s.Campaign(ctx, s.pool, ref.Project, ref.Campaign)
		}
		if err != nil {
			return nil, false, "", err
		}
	}
	ts, more, next := listq.Page(ts, tq.Limit, func(t Transaction) string { return t.ID })
	return ts, more, next, nil
}

// PointsKind is what a change of a card's points is, which decides the
// figures it moves.
type PointsKind int

const (
	Earned     PointsKind = iota // additions, accruals, activations, transfers in: points and balance up
	Subtracted                   // removals, transfers out: subtracted points up, balance down
	Redeemed                     // redemptions: redeemed points up, balance down
	Refunded                     // rollbacks: redeemed points down, balance up
)

// LedgerWrite is the one write path of points: every change of a locked
// card's points in a transaction goes through it. It queues the bucket
// writes and the ledger entries (with their webhook and tier notices) onto
// the transaction's batch as it goes, keeps each card's figures and next
// expiration in step, and queues each touched card's figures once at the
// end (Done).
type LedgerWrite struct {
	s         *Service
	projectID string
	now       time.Time
	b         *pgx.Batch
	touched   []*Card
	// earningTiers is set while the points of tier events are written:
	// the moves they cause earn nothing more (Record).
	earningTiers bool
	// tierEarned: this write gives the points of a tier event (earned in
	// the asynchronous phase), so the moves it causes earn nothing more.
	tierEarned bool
}

// LedgerWrite starts the writes of points of a transaction onto b.
func (s *Service) LedgerWrite(projectID string, b *pgx.Batch, now time.Time) *LedgerWrite {
	return &LedgerWrite{s: s, projectID: projectID, now: now, b: b}
}

func (l *LedgerWrite) touch(c *Card) {
	c.UpdatedAt = &l.now
	for _, t := range l.touched {
		if t == c {
			return
		}
	}
	l.touched = append(l.touched, c)
}

// Add puts points on c's bucket for exp (nil: never expiring): earned, or
// refunded (a rollback gives each taken part back to the bucket it left).
func (l *LedgerWrite) Add(c *Card, kind PointsKind, pts int64, exp *time.Time) {
	queueAddBucket(l.b, l.projectID, c.ID, pts, exp, l.now)
	c.addPoints(kind, pts, exp)
	l.touch(c)
}

// Take removes points from c's buckets bs, soonest-expiring first
// (subtracted or redeemed), and returns what is left of the buckets. The
// caller has checked the balance.
func (l *LedgerWrite) Take(c *Card, kind PointsKind, pts int64, bs []Bucket) ([]Bucket, error) {
	rest, err := queueTake(l.b, l.projectID, c.ID, bs, pts, l.now)
	if err != nil {
		return nil, err
	}
	c.takePoints(kind, pts, rest)
	l.touch(c)
	return rest, nil
}

// expire counts points of buckets past their date as expired; rest are the
// card's buckets left. The caller deletes the expired buckets.
func (l *LedgerWrite) expire(c *Card, pts int64, rest []Bucket) {
	c.ExpiredPoints += pts
	c.Balance -= pts
	c.expireFrom(rest)
	l.touch(c)
}

// Pending moves c's pending points (entries added, adjusted, canceled,
// activated).
func (l *LedgerWrite) Pending(c *Card, delta int64) {
	c.PendingPoints += delta
	l.touch(c)
}

// Record queues ledger entry t of c with its webhook and tier notices and,
// when the entry moved c between tiers, the points the campaign's tier
// event rules give for each move (TierEarning), on this write.
//
// Points a tier event gives may move the card again (a join's bonus that
// reaches the next tier): that move raises its notices but earns nothing
// more, so one change of points earns each tier event at most once and
// never loops, however the tiers and rules are drawn.
func (l *LedgerWrite) Record(ctx context.Context, t Transaction, c *Card, camp Campaign) error {
	moves, err := l.s.record(ctx, l.b, l.projectID, t, *c, camp)
	if err != nil || len(moves) == 0 || l.s.tierEarn == nil || camp.tierEarning == nil || l.earningTiers || l.tierEarned {
		return err
	}
	l.earningTiers = true
	defer func() { l.earningTiers = false }()
	holder := tiers.Of(camp.Tiers, c.Balance)
	holderID := ""
	if c.HolderID != nil {
		holderID = *c.HolderID
	}
	for _, m := range moves {
		accs, err := l.s.tierEarn.Earn(ctx, l.b, TierMove{Project: l.projectID, CardID: c.ID, CampaignID: c.CampaignID, HolderID: holderID,
			Col: camp.tierEarning, Event: m.event, Tier: m.tier, Previous: m.previous, Holder: holder, At: l.now})
		if err != nil {
			return err
		}
		for _, a := range accs {
			exp := a.Expires
			if a.ByProgram {
				exp = camp.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(l.now)
			}
			if _, _, err := l.credit(ctx, c, camp, PointsAccrual, a.Points, exp, nil, a.Details); err != nil {
				return err
			}
		}
	}
	return nil
}

// EarnsForTierEvent marks this write as giving the points of a tier event
// deferred to the asynchronous phase: the moves its entries cause raise
// their notices but earn nothing, as the moves of points a tier event
// gives inline do not (Record).
func (l *LedgerWrite) EarnsForTierEvent() { l.tierEarned = true }

// Credit adds pts to card as an automatic entry of type typ (an accrual,
// a referral's reward) whose points expire at exp, with details besides
// its balance; the entry, its webhook and tier notices and points_added are
// queued. It answers the entry and the card's balance after it.
func (l *LedgerWrite) Credit(ctx context.Context, card *LockedCard, typ string, pts int64, exp *time.Time, sourceID *string,
	details map[string]any) (Transaction, Balance, error) {
	return l.credit(ctx, &card.Card, card.Campaign, typ, pts, exp, sourceID, details)
}

func (l *LedgerWrite) credit(ctx context.Context, card *Card, camp Campaign, typ string, pts int64, exp *time.Time, sourceID *string,
	details map[string]any) (Transaction, Balance, error) {
	l.Add(card, Earned, pts, exp)
	bal := card.BalanceAfter(pts)
	bal.OperationType = "AUTOMATIC"
	t := Transaction{ID: ids.New("vtx_"), VoucherID: card.ID, CampaignID: card.CampaignID, SourceID: sourceID,
		Source: ptr("API"), Type: typ, CreatedAt: jsonx.Time{Time: l.now}, Delta: pts}
	details["balance"] = bal
	t.Details, _ = json.Marshal(details)
	if err := l.Record(ctx, t, card, camp); err != nil {
		return t, bal, err
	}
	return t, bal, l.s.notify.Queue(ctx, l.b, webhooks.Notice{Project: l.projectID, Type: EventPointsAdded, Entity: card.ID,
		Object: map[string]any{"voucher": card.View(camp), "balance": bal, "transaction": t}})
}

// Done queues the figures of every card the write touched and returns the batch.
func (l *LedgerWrite) Done() *pgx.Batch {
	for _, c := range l.touched {
		queueFigures(l.b, l.projectID, c)
	}
	l.touched = nil
	return l.b
}

// addPoints is the figures' side of add.
func (c *Card) addPoints(kind PointsKind, pts int64, exp *time.Time) {
	switch kind {
	case Earned:
		c.Points += pts
	case Refunded:
		c.RedeemedPoints -= pts
	default:
		panic(fmt.Sprintf("loyalty: add of kind %d", kind))
	}
	c.Balance += pts
	c.expireAlso(pts, exp)
}

// takePoints is the figures' side of take.
func (c *Card) takePoints(kind PointsKind, pts int64, rest []Bucket) {
	switch kind {
	case Subtracted:
		c.SubtractedPoints += pts
	case Redeemed:
		c.RedeemedPoints += pts
	default:
		panic(fmt.Sprintf("loyalty: take of kind %d", kind))
	}
	c.Balance -= pts
	c.expireFrom(rest)
}

// PointsExceeded is the reference's error for a card whose balance does not
// cover what is asked of it.
func PointsExceeded(c Card, want int64) error {
	return apierr.New(http.StatusBadRequest, "loyalty_card_points_exceeded", "Loyalty card points exceeded",
		fmt.Sprintf("Card %s has %d points; %d cannot be taken from it.", c.Code, c.Balance, want))
}
