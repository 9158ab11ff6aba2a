package referrals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/events"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Via is what converts a referee: a custom event, or a redemption of the
// referral code (the stackable redemption of issue 19 calls Convert).
type Via struct {
	Kind string // ViaCustomEvent or ViaRedemption
	ID   string // the event's or the redemption's id
	// Event and SchemaID are a custom event's name and schema, SchemaName
	// the schema's name.
	Event, SchemaID, SchemaName string
	// Object is the event (CustomEvent) or the redemption as webhooks show it.
	Object any
	// ReferrerID, when not empty, is the customer the request names as the
	// referrer: the code's holder must be them.
	ReferrerID string
}

// details are what a reward's ledger entry says of its cause.
func (v Via) details() map[string]any {
	if v.Kind == ViaRedemption {
		return map[string]any{"redemption": map[string]any{"id": v.ID}}
	}
	return map[string]any{"custom_event": map[string]any{"id": v.ID, "type": v.Event},
		"event_schema": map[string]any{"id": v.SchemaID, "name": v.SchemaName}}
}

// cause names v in a webhook notice: custom_event or redemption.
func (v Via) cause(ev map[string]any) map[string]any {
	ev[map[bool]string{true: "redemption", false: "custom_event"}[v.Kind == ViaRedemption]] = v.Object
	return ev
}

// convertsOn reports whether p converts a referee on v.
func (p Program) convertsOn(v Via) bool {
	if p.ConversionEventType != v.Kind {
		return false
	}
	ce := p.CustomEvent
	return v.Kind == ViaRedemption || ce != nil && (ce.Name == v.Event || ce.ID != nil && *ce.ID == v.SchemaID)
}

// Conversion is a referee converted by Convert.
type Conversion struct {
	ID                string
	Campaign          vouchers.Campaign
	Code              vouchers.Voucher
	Referrer, Referee customers.Customer
	// Referees counts the referrer's referees in the program, this one included.
	Referees int64
}

// ReferrerNotPermitted is the reference's error for a referrer converting
// through their own code.
func ReferrerNotPermitted(code string) error {
	return apierr.New(http.StatusBadRequest, "referrer_not_permitted_to_redeem", "Referrer not permitted to redeem",
		fmt.Sprintf("Referral code %s belongs to this customer: a referrer cannot be referred by their own code.", code))
}

// referralCode reads a live referral code by code or id, its campaign and
// program: 404 when there is no such voucher, 400 when it is not a
// referral code.
func (s *Service) referralCode(ctx context.Context, q db.Querier, projectID, code string) (vouchers.Voucher, vouchers.Campaign, Program, error) {
	var f vouchers.Found
	b := &pgx.Batch{}
	vouchers.QueueRead(b, projectID, code, false, &f)
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return f.Voucher, vouchers.Campaign{}, Program{}, err
	}
	if !f.Found {
		return f.Voucher, vouchers.Campaign{}, Program{}, apierr.NotFound("voucher", code)
	}
	notReferral := apierr.InvalidPayload(fmt.Sprintf("voucher %s is not a referral code: it belongs to no REFERRAL_PROGRAM campaign", code))
	if f.CampaignID == nil {
		return f.Voucher, vouchers.Campaign{}, Program{}, notReferral
	}
	c, err := campaigns.Get[vouchers.Template](ctx, q, projectID, *f.CampaignID, false, "REFERRAL_PROGRAM")
	if errors.Is(err, db.ErrNotFound) {
		return f.Voucher, c, Program{}, notReferral
	}
	if err != nil {
		return f.Voucher, c, Program{}, err
	}
	p, err := programOf(c)
	return f.Voucher, c, p, err
}

// usable refuses a code that its campaign's or its own dates or state
// keep from converting at now.
func usable(c vouchers.Campaign, v vouchers.Voucher, now time.Time) error {
	for _, w := range []struct {
		what, id, off string
		active        bool
		start, end    *time.Time
	}{{"campaign", c.Name, "campaign_disabled", c.Attrs.Active, c.Attrs.StartDate, c.Attrs.ExpirationDate},
		{"voucher", v.Code, "voucher_disabled", v.Active, v.Attrs.StartDate, v.Attrs.ExpirationDate}} {
		switch {
		case !w.active:
			return apierr.New(http.StatusBadRequest, w.off, "Referral "+w.what+" is disabled", fmt.Sprintf("The %s %s is not active.", w.what, w.id))
		case w.start != nil && now.Before(*w.start):
			return apierr.New(http.StatusBadRequest, "voucher_not_active", "Referral "+w.what+" not active yet",
				fmt.Sprintf("The %s %s starts at %s.", w.what, w.id, w.start.UTC().Format(time.RFC3339)))
		case w.end != nil && !now.Before(*w.end):
			return apierr.New(http.StatusBadRequest, "voucher_expired", "Referral "+w.what+" expired",
				fmt.Sprintf("The %s %s expired at %s.", w.what, w.id, w.end.UTC().Format(time.RFC3339)))
		}
	}
	return nil
}

// Convert converts refereeID (a customer id) through referral code code
// (or its voucher id) in tx, the transaction of what converts them (via):
// the referral is recorded once per referee and program, the referee holds
// the code, the referee's reward and the referrer's due tiers are written
// to their cards, and customer.referred and customer.rewarded are raised.
// It answers nil when the code's program converts on something else or the
// referee was converted in the program before (concurrent conversions
// included: the referrals' unique index decides), and 400
// referrer_not_permitted_to_redeem for the code's own referrer.
//
// Conversion by custom event calls it from POST /v1/events (ConvertEvent);
// conversion by redemption is for the redemption of a referral code.
func (s *Service) Convert(ctx context.Context, tx pgx.Tx, projectID, code, refereeID string, via Via) (_ *Conversion, err error) {
	ctx, span := tracer.Start(ctx, "referrals.Convert")
	defer telemetry.End(span, &err)
	v, c, p, err := s.referralCode(ctx, tx, projectID, code)
	if err != nil || !p.convertsOn(via) {
		return nil, err
	}
	switch {
	case v.HolderID == nil:
		return nil, apierr.InvalidPayload(fmt.Sprintf("referral code %s has no referrer yet: publish it to the referrer first (POST /v1/publications)", v.Code))
	case via.ReferrerID != "" && via.ReferrerID != *v.HolderID:
		return nil, apierr.InvalidPayload(fmt.Sprintf("referral.referrer_id is not the referrer of code %s, who holds it", v.Code))
	case refereeID == *v.HolderID:
		return nil, ReferrerNotPermitted(v.Code)
	}
	now := s.clock.Now().UTC().Truncate(time.Millisecond)
	if err := usable(c, v, now); err != nil {
		return nil, err
	}
	conv := &Conversion{ID: ids.New("rfl_"), Campaign: c, Code: v}
	tag, err := tx.Exec(ctx, `INSERT INTO referrals (project_id, id, campaign_id, voucher_id, code, referrer_id, referee_id,
		related_object_type, related_object_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (project_id, campaign_id, referee_id) DO NOTHING`,
		projectID, conv.ID, c.ID, v.ID, v.Code, *v.HolderID, refereeID, via.Kind, via.ID, now)
	if err != nil || tag.RowsAffected() == 0 {
		return nil, err // converted before: once per referee and program
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO referral_referrers (project_id, campaign_id, referrer_id, referees) VALUES ($1, $2, $3, 1)
		ON CONFLICT (project_id, campaign_id, referrer_id) DO UPDATE SET referees = referral_referrers.referees + 1
		RETURNING referees`, projectID, c.ID, *v.HolderID).QueryRow(func(r pgx.Row) error { return r.Scan(&conv.Referees) })
	queueHolder(b, projectID, Holder{ID: ids.New("rh_"), VoucherID: v.ID, CampaignID: c.ID, CustomerID: refereeID, Role: Referee,
		Metadata: map[string]any{}, CreatedAt: now})
	customers.QueueGetByIDOf(b, projectID, "$2", []any{*v.HolderID}, func(x customers.Customer) { conv.Referrer = x })
	customers.QueueGetByIDOf(b, projectID, "$2", []any{refereeID}, func(x customers.Customer) { conv.Referee = x })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if conv.Referee.ID == "" || conv.Referrer.ID == "" {
		return nil, apierr.NotFound("customer", refereeID)
	}
	if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventReferred, Entity: refereeID,
		Object: via.cause(map[string]any{"customer": conv.Referee.Simple(),
			"referrer": conv.Referrer.Simple(), "campaign": simpleCampaign(c), "voucher": simpleVoucher(v)})}); err != nil {
		return nil, err
	}
	if p.RefereeReward != nil {
		if err := s.reward(ctx, tx, projectID, conv, conv.Referee, *p.RefereeReward, nil, via, now); err != nil {
			return nil, err
		}
	}
	var in []string // the referee's segments, read once if a tier requires one
	for i := range p.ReferralTiers {
		t := &p.ReferralTiers[i]
		n := conv.Referees
		if t.Parameters.Segment != nil {
			if in == nil {
				if in, err = s.segments.Of(ctx, tx, projectID, conv.Referee); err != nil {
					return nil, err
				}
				in = append(in, "") // read, even when in none
			}
			if !slices.Contains(in, t.Parameters.Segment.ID) {
				continue // a referee outside the segment does not count towards the tier
			}
			if err := tx.QueryRow(ctx, `INSERT INTO referral_tier_referees (project_id, campaign_id, referrer_id, tier_id, referees)
				VALUES ($1, $2, $3, $4, 1) ON CONFLICT (project_id, campaign_id, referrer_id, tier_id)
				DO UPDATE SET referees = referral_tier_referees.referees + 1 RETURNING referees`,
				projectID, c.ID, *v.HolderID, t.ID).Scan(&n); err != nil {
				return nil, err
			}
		}
		if t.due(n) {
			if err := s.reward(ctx, tx, projectID, conv, conv.Referrer, t.Parameters.Reward, t, via, now); err != nil {
				return nil, err
			}
		}
	}
	return conv, nil
}

// reward gives to rw in tx: points on their card of rw's loyalty program
// (joining them to it first), or credits on their gift card of rw's
// campaign (given one first); tier is the referrer's tier that rewards, nil
// for the referee's reward.
func (s *Service) reward(ctx context.Context, tx pgx.Tx, projectID string, conv *Conversion, to customers.Customer, rw Reward,
	tier *Tier, via Via, now time.Time) error {
	ev := via.cause(map[string]any{"customer": to.Simple(), "holder": to.Simple(), "campaign": simpleCampaign(conv.Campaign)})
	if tier != nil {
		ev["referral_tier"] = tier.simple(conv.Campaign.ID)
	}
	send := func(b *pgx.Batch) error { return tx.SendBatch(ctx, b).Close() }
	if rw.Type == GiftVoucher {
		v, claimed, err := s.vouchers.GiftCardOf(ctx, tx, campaigns.HolderRef{Project: projectID, Campaign: rw.RelatedObjectParent.ID, Customer: to.ID})
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		t, err := s.vouchers.QueueCredits(ctx, b, projectID, &v, rw.Amount, loyalty.CreditsAddition, nil, now)
		if err != nil {
			return err
		}
		if err := send(b); err != nil {
			return err
		}
		var d struct {
			Balance json.RawMessage `json:"balance"`
		}
		_ = json.Unmarshal(t.Details, &d)
		view := v.View()
		if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: vouchers.EventGiftBalanceAdded, Entity: v.ID,
			Object: map[string]any{"voucher": view, "balance": d.Balance, "transaction": t}}); err != nil {
			return err
		}
		if claimed {
			if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: loyalty.EventVoucherPublished, Entity: v.ID,
				Object: map[string]any{"customer": to.Simple(), "voucher": view}}); err != nil {
				return err
			}
		}
		ev["voucher"], ev["balance"] = view, map[string]any{"amount": rw.Amount}
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventRewarded, Entity: to.ID, Object: ev})
	}
	card, _, err := s.loyalty.JoinIn(ctx, tx, campaigns.HolderRef{Project: projectID, Campaign: rw.RelatedObjectParent.ID, Customer: to.ID})
	if err != nil {
		return err
	}
	lc, err := s.loyalty.LockCard(ctx, send, loyalty.CardRef{Project: projectID, Campaign: card.CampaignID, Member: card.ID}, nil)
	if err != nil {
		return err
	}
	l := s.loyalty.LedgerWrite(projectID, &pgx.Batch{}, now)
	_, bal, err := l.Credit(ctx, &lc, loyalty.PointsAddition, rw.Amount, lc.Campaign.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(now),
		nil, via.details())
	if err != nil {
		return err
	}
	if err := send(l.Done()); err != nil {
		return err
	}
	view := lc.View(lc.Campaign)
	ev["voucher"], ev["balance"] = view, map[string]any{"points": rw.Amount}
	if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventRewarded, Entity: to.ID, Object: ev}); err != nil {
		return err
	}
	return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventRewardedPoints, Entity: to.ID,
		Object: map[string]any{"customer": to.Simple(), "holder": to.Simple(),
			"voucher": view, "campaign": map[string]any{"id": lc.Campaign.ID, "name": lc.Campaign.Name, "campaign_type": lc.Campaign.CampaignType,
				"object": "campaign"}, "balance": bal, "event": via.Object}})
}

// ConvertEvent converts the referee of a custom event (POST /v1/events
// with referral.code or referral.referrer_id) in the event's transaction:
// the events service's referral hook (events.Referrals, in events.Deps). It
// answers the activity's referral object, or nil when the event converted
// nobody.
func (s *Service) ConvertEvent(ctx context.Context, tx pgx.Tx, projectID string, r events.Referral) (any, error) {
	customer := map[string]any{"id": r.CustomerID, "object": "customer"}
	via := Via{Kind: ViaCustomEvent, ID: r.EventID, Event: r.EventType, SchemaID: r.SchemaID, SchemaName: r.SchemaName,
		Object: map[string]any{"id": r.EventID, "object": "event", "type": r.EventType, "customer": customer,
			"referral": map[string]any{"code": r.Code, "referrer_id": r.ReferrerID}, "loyalty": nil, "metadata": r.Metadata,
			"created_at": jsonx.Time{Time: r.CreatedAt}}}
	if r.ReferrerID != nil {
		ref, err := s.customers.GetIn(ctx, tx, projectID, *r.ReferrerID)
		if err != nil {
			return nil, err
		}
		via.ReferrerID = ref.ID
	}
	code := ""
	if r.Code != nil {
		code = *r.Code
	} else {
		var err error
		if code, err = s.codeOf(ctx, tx, projectID, via); err != nil || code == "" {
			return nil, err
		}
	}
	conv, err := s.Convert(ctx, tx, projectID, code, r.CustomerID, via)
	if conv == nil {
		return nil, err
	}
	return map[string]any{"referrer": conv.Referrer.Simple(), "voucher": simpleVoucher(conv.Code), "campaign": simpleCampaign(conv.Campaign)}, nil
}

// ConvertRedemption converts customerID through the referral code a
// redemption redeemed, in the redemption's transaction: the engine's
// referral hook (engine.Referrals, in engine.Deps). redemptionID is the code's
// redemption, which the referral records as its related object.
func (s *Service) ConvertRedemption(ctx context.Context, tx pgx.Tx, projectID, code, customerID, redemptionID string, redemption any) error {
	_, err := s.Convert(ctx, tx, projectID, code, customerID, Via{Kind: ViaRedemption, ID: redemptionID, Object: redemption})
	return err
}

// codeOf is the referral code, held by via's referrer, of a program that
// converts on via: how an event that names only referral.referrer_id
// converts. "" when they hold none.
func (s *Service) codeOf(ctx context.Context, q db.Querier, projectID string, via Via) (string, error) {
	var held []vouchers.Voucher
	b := &pgx.Batch{}
	vouchers.QueueHeldBy(b, projectID, "$2", via.ReferrerID, 1000, &held)
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return "", err
	}
	seen := map[string]bool{}
	for _, v := range held {
		if v.CampaignID == nil || seen[*v.CampaignID] {
			continue
		}
		seen[*v.CampaignID] = true
		c, err := campaigns.Get[vouchers.Template](ctx, q, projectID, *v.CampaignID, false, "REFERRAL_PROGRAM")
		if errors.Is(err, db.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", err
		}
		if p, err := programOf(c); err == nil && p.convertsOn(via) {
			return v.Code, nil
		}
	}
	return "", nil
}

// Summary is a customer's referrals summary as GET /v1/customers/{id}
// shows it (CustomerReferrals): the programs that referred them.
func (s *Service) Summary(ctx context.Context, projectID, customerID string) (any, error) {
	type item struct {
		CampaignID        string     `json:"campaign_id"`
		ReferrerID        string     `json:"referrer_id"`
		RelatedObjectID   string     `json:"related_object_id"`
		RelatedObjectType string     `json:"related_object_type"`
		Date              jsonx.Time `json:"date"`
	}
	items, err := db.Collect(func(r pgx.Row) (item, error) {
		var i item
		return i, r.Scan(&i.CampaignID, &i.ReferrerID, &i.RelatedObjectID, &i.RelatedObjectType, &i.Date.Time)
	})(s.pool.Query(ctx, `SELECT campaign_id, referrer_id, related_object_id, related_object_type, created_at FROM referrals
		WHERE project_id = $1 AND referee_id = $2 ORDER BY id`, projectID, customerID))
	if err != nil {
		return nil, err
	}
	if items == nil {
		items = []item{}
	}
	return map[string]any{"total": len(items), "campaigns": items}, nil
}

// ReferredCustomers counts the referees a program converted within p: the
// summary's referred_customers (GET /v1/campaigns/{id}/summary).
func (s *Service) ReferredCustomers(ctx context.Context, projectID, campaignID string, p campaigns.Period) (int64, error) {
	return p.Count(ctx, s.pool, `SELECT count(*) FROM referrals WHERE project_id = $1 AND campaign_id = $2`,
		"created_at", projectID, campaignID)
}
