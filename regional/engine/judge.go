package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/engine/stacked"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/validation"
	"github.com/tallyhq/tally/regional/vouchers"
)

// judge checks resolved redeemables: their campaigns (read in one query),
// the sessions that hold their vouchers, their windows and quantities, and
// their validation rules; a refused one carries its refusal.
func (e *Engine) judge(ctx context.Context, q db.Querier, projectID string, order *orders.Request, meta map[string]any,
	cust *customers.Customer, cs []*Candidate, sessionKey string, now time.Time) error {
	return e.judgeWith(ctx, q, projectID, order, meta, cust, cs, sessionKey, now, nil, rules.ScopeAll)
}

// judgeWith is judge taking campaign windows and rule assignments from pre
// where it has them (qualifications' catalogue), reading the rest, and
// reading of the rules' conditions those scope names.
func (e *Engine) judgeWith(ctx context.Context, q db.Querier, projectID string, order *orders.Request, meta map[string]any,
	cust *customers.Customer, cs []*Candidate, sessionKey string, now time.Time, pre *Prefetched, scope rules.Scope) error {
	// What pre holds of each candidate's object and campaign, read once.
	var objs, camps []preObject
	if pre != nil {
		objs, camps = make([]preObject, len(cs)), make([]preObject, len(cs))
		for i, c := range cs {
			if c.pre != nil {
				objs[i], camps[i] = c.pre.tier, c.pre.campaign
			} else {
				objs[i], camps[i] = pre.object(c.ObjectID()), pre.object(c.wantsCampaign())
			}
		}
	}
	var campaignIDs, voucherIDs []string
	for i, c := range cs {
		if c.voucher != nil {
			voucherIDs = append(voucherIDs, c.voucher.ID)
		}
		if id := c.wantsCampaign(); id != "" && (pre == nil || !camps[i].hasCampaign()) {
			campaignIDs = append(campaignIDs, id)
		}
	}
	// One round trip: the campaigns' windows, the sessions holding the
	// vouchers, the rules of every candidate and campaign (some may be
	// refused by the checks below and their rules go unused) and those
	// rules' versions, which evaluating them checks its compiled rules by.
	windows, held := map[string]campaigns.Window{}, map[string]int64{}
	assigned := map[string][]string{}
	var ask, known []string
	need := func(o string, p preObject) {
		switch {
		case o == "":
		case pre == nil || !p.known:
			ask = append(ask, o)
		default:
			known = append(known, p.rules...)
		}
	}
	for i, c := range cs {
		if c.refusal != nil {
			continue
		}
		var obj, camp preObject
		if pre != nil {
			obj, camp = objs[i], camps[i]
		}
		need(c.ObjectID(), obj)
		need(c.wantsCampaign(), camp)
	}
	b := &pgx.Batch{}
	if len(campaignIDs) > 0 {
		campaigns.QueueWindows(b, projectID, campaignIDs, windows)
	}
	if len(voucherIDs) > 0 {
		queueHeld(b, projectID, voucherIDs, sessionKey, now, held)
	}
	var versions validation.Versions
	if (len(ask) > 0 || len(known) > 0) && e.rules != nil {
		if len(ask) > 0 {
			validation.QueueRulesOf(b, projectID, ask, assigned)
		}
		versions = validation.Versions{}
		validation.QueueVersions(b, projectID, known, ask, versions)
	}
	if b.Len() > 0 {
		if err := q.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	if pre != nil {
		// Only the candidates' own: the catalogue holds a project's every
		// tier, campaign and rule assignment. Windows are read from it in
		// place below (a copy of each candidate's was a fifth of judging's
		// CPU at 1,000 tiers).
		for i, c := range cs {
			// An object without rules is left out: evaluating reads it
			// the same, and most of a catalogue's tiers have none.
			if o := c.ObjectID(); len(objs[i].rules) > 0 && o != "" {
				assigned[o] = objs[i].rules
			}
			if o := c.wantsCampaign(); len(camps[i].rules) > 0 && o != "" {
				assigned[o] = camps[i].rules
			}
		}
	}
	var objects []string
	for i, c := range cs {
		if c.refusal != nil {
			continue
		}
		if cid := c.wantsCampaign(); cid != "" {
			k, ok := windows[cid]
			if !ok && pre != nil && camps[i].window != nil {
				k, ok = *camps[i].window, true
			}
			if !ok {
				c.refusal = &Refusal{Code: 404, Key: "not_found", Message: "Resource not found",
					Details: "The campaign of " + c.req.ID + " was deleted."}
				continue
			}
			c.campaign = &k
		}
		c.refusal = e.check(c, cust, held, now)
		if c.voucher != nil {
			c.held = held[c.voucher.ID]
		}
		if c.refusal == nil {
			objects = append(objects, c.ObjectID())
			if c.campaign != nil {
				objects = append(objects, c.campaign.ID)
			}
		}
	}
	if len(objects) == 0 {
		return nil
	}
	return e.evaluate(ctx, q, projectID, order, meta, cust, cs, assigned, now, scope, pre, versions)
}

// wantsCampaign is the id of the redeemable's campaign, "" for none.
func (c *Candidate) wantsCampaign() string {
	if c.tier != nil {
		return c.tier.CampaignID
	}
	if c.card != nil {
		return c.card.Card.CampaignID
	}
	if c.voucher != nil && c.voucher.CampaignID != nil {
		return *c.voucher.CampaignID
	}
	return ""
}

// check says why a resolved redeemable cannot be used now (by cust, when
// the request names a stored customer), or nil.
func (e *Engine) check(c *Candidate, cust *customers.Customer, held map[string]int64, now time.Time) *Refusal {
	if k := c.campaign; k != nil {
		if r := Window(k.Validity).check(now, "campaign", k.Name); r != nil {
			return r
		}
	}
	if t := c.tier; t != nil {
		if r := t.Window.check(now, "promotion tier", t.ID); r != nil {
			return r
		}
		if !present(t.Discount) {
			return refuse("invalid_redeemable", "Promotion tier has no discount", "The promotion tier "+t.ID+" has no discount to apply.")
		}
		return nil
	}
	if p := c.card; p != nil {
		// A card's points are its holder's: a request naming another
		// customer cannot spend them.
		if h := p.Card.HolderID; h != nil && cust != nil && cust.ID != *h {
			return refuse("customer_not_holder", "Customer is not the card's holder",
				fmt.Sprintf("The loyalty card %s belongs to another customer: only its holder pays with its points.", p.Card.Code))
		}
		if err := p.Check(); err != nil {
			var ae *apierr.Error
			if errors.As(err, &ae) {
				return &Refusal{Code: ae.Status, Key: ae.Key, Message: ae.Message, Details: ae.Details}
			}
			return refuse("invalid_redeemable", "Loyalty card cannot pay", err.Error())
		}
		return nil
	}
	v := c.voucher
	a := v.Attrs
	w := Window{Active: v.Active, StartDate: a.StartDate, ExpirationDate: a.ExpirationDate,
		ValidityTimeframe: a.ValidityTimeframe, ValidityDayOfWeek: a.ValidityDayOfWeek, ValidityHours: a.ValidityHours}
	if r := w.check(now, "voucher", v.Code); r != nil {
		return r
	}
	// "A referrer can't redeem the code they own" (the reference's rule for
	// referral codes, whatever the program converts on).
	if c.campaign != nil && c.campaign.CampaignType == "REFERRAL_PROGRAM" && cust != nil && cust.ID != "" &&
		v.HolderID != nil && *v.HolderID == cust.ID {
		return refuse("referrer_not_permitted_to_redeem", "Referrer not permitted to redeem",
			fmt.Sprintf("Referral code %s belongs to this customer: a referrer cannot redeem their own code.", v.Code))
	}
	if v.Quantity != nil && v.Redeemed+held[v.ID] >= *v.Quantity {
		return refuse("quantity_exceeded", "Quantity exceeded",
			fmt.Sprintf("The voucher %s has been redeemed %d of %d times (sessions hold %d).", v.Code, v.Redeemed, *v.Quantity, held[v.ID]))
	}
	switch v.Type {
	case vouchers.Discount:
	case vouchers.Gift:
		g := v.Attrs.Gift
		if g == nil || g.Balance <= 0 {
			return refuse("gift_amount_exceeded", "Gift amount exceeded", "The gift card "+v.Code+" has no credits left.")
		}
		if x := c.req.Gift; x != nil && x.Credits != nil && *x.Credits > g.Balance {
			return refuse("gift_amount_exceeded", "Gift amount exceeded",
				fmt.Sprintf("gift.credits %d is more than the gift card's balance, %d.", *x.Credits, g.Balance))
		}
	default:
		return refuse("invalid_voucher", "Voucher cannot be redeemed here",
			fmt.Sprintf("The voucher %s is a %s: stacked requests take discount vouchers, gift cards and promotion tiers.", v.Code, v.Type))
	}
	return nil
}

// evaluate runs the validation rules of the checked redeemables (assigned
// to the voucher or tier, or to its campaign) against the order and the
// customer, reading the conditions scope names; a failing rule refuses its
// redeemable with the rule's message. A candidate whose rules require one
// of the order's products is marked so (qualifications' PRODUCTS).
func (e *Engine) evaluate(ctx context.Context, q db.Querier, projectID string, order *orders.Request, meta map[string]any,
	cust *customers.Customer, cs []*Candidate, assigned map[string][]string, now time.Time, scope rules.Scope, pre *Prefetched,
	versions validation.Versions) error {
	if len(assigned) == 0 || e.rules == nil {
		return nil
	}
	in := rules.Input{Order: ruleOrder(order), Now: now, Metadata: meta, Scope: scope}
	if err := in.Order.Check(); err != nil {
		return err
	}
	if cust != nil {
		in.Customer = &rules.Customer{ID: cust.ID, Metadata: cust.Attrs.Metadata}
		if cust.SourceID != nil {
			in.Customer.SourceID = *cust.SourceID
		}
	}
	// Every rule of every candidate, prepared with one version check; the
	// redemption counts they may read, in one query.
	ruled := map[*Candidate][]string{}
	var all []string
	seen := map[string]bool{}
	for _, c := range cs {
		if c.refusal != nil {
			continue
		}
		ids := append(append([]string(nil), assigned[c.ObjectID()]...), assigned[c.CampaignID()]...)
		if len(ids) == 0 {
			continue
		}
		ruled[c] = ids
		for _, id := range ids {
			if !seen[id] {
				seen[id], all = true, append(all, id)
			}
		}
	}
	if len(ruled) == 0 {
		return nil
	}
	prepared, err := e.rules.PrepareRead(ctx, q, projectID, all, in.Order, versions)
	if err != nil {
		return err
	}
	if in.Customer != nil && e.Segments != nil && prepared.ReadsSegments(all) {
		if pre != nil && pre.SegmentsRead { // by Screen, for this request
			in.Customer.Segments = pre.Segments
		} else if in.Customer.Segments, err = e.Segments.Of(ctx, q, projectID, *cust); err != nil {
			return err
		}
	}
	// Counting redemptions reads the campaigns' history: only for rules
	// that read it.
	counts := func(*Candidate) rules.RedemptionCounts { return rules.RedemptionCounts{} }
	if prepared.ReadsCounts(all) {
		if counts, err = e.counts(ctx, q, projectID, ruled, cust, now); err != nil {
			return err
		}
	}
	for _, c := range cs {
		ids, ok := ruled[c]
		if !ok {
			continue
		}
		cin := in
		cin.Redemptions = counts(c)
		c.readsCounts = prepared.ReadsCounts(ids)
		c.namesItem = prepared.NamesItemOf(ids, in.Order)
		for _, v := range prepared.Run(ids, cin) {
			if !v.Valid {
				msg := "The order or customer does not meet the validation rules."
				if v.Error != nil && v.Error.Message != "" {
					msg = v.Error.Message
				}
				c.refusal = &Refusal{Code: 400, Key: "order_rules_violated", Message: "Validation rules not met", Details: msg}
				break
			}
			if v.Applicable != nil {
				c.lines = intersect(c.lines, v.Applicable)
			}
		}
	}
	return nil
}

// intersect is the lines both admit; nil admits every line.
func intersect(a, b []int) []int {
	if a == nil {
		return b
	}
	out := []int{}
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
			}
		}
	}
	return out
}

// counts are the successful redemptions the rules count, for each of the
// ruled candidates: of its object by the customer, in its campaign, and in
// its campaign today; read in one query (regional/engine/stacked).
func (e *Engine) counts(ctx context.Context, q db.Querier, projectID string, ruled map[*Candidate][]string, cust *customers.Customer,
	now time.Time) (func(*Candidate) rules.RedemptionCounts, error) {
	custID := ""
	if cust != nil {
		custID = cust.ID
	}
	var objects, campaigns []string
	for c := range ruled {
		objects = append(objects, c.ObjectID())
		if id := c.CampaignID(); id != "" {
			campaigns = append(campaigns, id)
		}
	}
	n, err := stacked.CountForRules(ctx, q, projectID, custID, objects, campaigns, now.UTC().Truncate(24*time.Hour))
	if err != nil {
		return nil, err
	}
	return func(c *Candidate) rules.RedemptionCounts {
		cid := c.CampaignID()
		if cid == "" {
			return rules.RedemptionCounts{PerCustomer: n.ByCustomer[c.ObjectID()]}
		}
		return rules.RedemptionCounts{PerCustomer: n.ByCustomer[c.ObjectID()], PerCampaign: n.PerCampaign[cid], PerDay: n.PerDay[cid]}
	}, nil
}
