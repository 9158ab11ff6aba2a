package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/engine/calc"
	"github.com/tallyhq/tally/regional/engine/stacked"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Redeem is POST /v1/redemptions: the redeemables validated as Validate
// does, under their vouchers' row locks, and applied all together in one
// transaction (redemption counts, gift credits through the ledger, the
// order with its discounts, a parent redemption and one child per
// redeemable, the notices) or not at all: when one fails, the attempt is
// stored as FAILURE redemptions with the reason and the answer is 400.
func (e *Engine) Redeem(ctx context.Context, projectID string, r Request) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "engine.Redeem")
	defer telemetry.End(span, &err)
	rules, err := e.admit(ctx, projectID, &r)
	if err != nil {
		return nil, err
	}
	if err := e.Redemptions.CheckMetadata(ctx, projectID, r.Metadata); err != nil {
		return nil, err
	}
	var out map[string]any
	var refused error
	paid := false
	mode := lockHeld
	// countLocked: the discount vouchers are counted on their rows
	// (vouchers.CountLocked), where a first attempt found a counter shard
	// dry; else on shards.
	countLocked := false
	// Four round trips on the common path (TestARedemptionWritesInFourRoundTrips):
	// the customer's upsert with the BEGIN, resolve's batch, judging's, and
	// everything a success or a failure writes with the COMMIT.
	redeem := func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		out, refused, paid = nil, nil, false
		now := e.Now()
		tx := p.Tx()
		var cust *customers.Customer
		if r.Customer != nil {
			c, _, err := e.Customers.UpsertIn(ctx, tx, projectID, r.Customer)
			if err != nil {
				return nil, err
			}
			cust = &c
		}
		key := ""
		if r.Session != nil && r.Session.Key != nil {
			key = *r.Session.Key
		}
		cs, _, err := e.resolve(ctx, tx, projectID, &r, &requestCustomer{given: cust}, key, mode, now)
		if err != nil {
			return nil, err
		}
		if mode == lockHeld && countsUnlocked(cs) {
			return nil, errLockAll
		}
		o, err := e.decide(ctx, tx, projectID, &r, cs, rules)
		if err != nil {
			return nil, err
		}
		if !o.valid {
			refused = failure(o)
			return e.storeFailure(ctx, projectID, &r, o, cust, now)
		}
		var last *pgx.Batch
		out, paid, last, err = e.storeSuccess(ctx, tx, projectID, &r, o, cust, key, countLocked || mode == lockAll, now)
		return last, err
	}
	err = db.InPipe(ctx, e.pool, pgx.ReadCommitted, redeem)
	if errors.Is(err, errLockAll) {
		mode = lockAll
		err = db.InPipe(ctx, e.pool, pgx.ReadCommitted, redeem)
	}
	if errors.Is(err, vouchers.ErrShardDry) {
		// The counter shard had no quota left: once more, counting on the
		// voucher's row, which grants the shards more.
		countLocked = true
		err = db.InPipe(ctx, e.pool, pgx.ReadCommitted, redeem)
	}
	// Others took a reward's last units, or a voucher's last uses, after
	// it was read: again, until an attempt reads them out and is stored
	// as a FAILURE (or finds a use given back). The count's locked read
	// goes with the COMMIT, so an attempt that read the last use free can
	// meet the count refused more than once when many redeem the code at
	// once; a refusal answered without its FAILURE record is missing from
	// the voucher's history (the hot code test under SERIALIZABLE).
	for try := 0; try < 8 && (redemptions.IsOutOfStock(err) || errors.Is(err, vouchers.ErrQuantityExceeded)); try++ {
		countLocked = true
		err = db.InPipe(ctx, e.pool, pgx.ReadCommitted, redeem)
	}
	if redemptions.IsOutOfStock(err) {
		return nil, apierr.New(400, "quantity_exceeded", "Quantity exceeded", "A reward the request pays for ran out of stock.")
	}
	if errors.Is(err, vouchers.ErrQuantityExceeded) {
		return nil, apierr.New(400, "quantity_exceeded", "Quantity exceeded", "A voucher the request redeems has been redeemed as many times as its quantity allows.")
	}
	if err != nil {
		return nil, err
	}
	if paid {
		e.Orders.Wake()
	}
	if refused != nil {
		return nil, refused
	}
	return out, nil
}

// errLockAll ends a redemption's first attempt, read with lockHeld, when a
// discount voucher it read unlocked has rules that count redemptions: the
// attempt runs again with every voucher locked (lockAll).
var errLockAll = errors.New("engine: rules count redemptions: lock the vouchers")

// countsUnlocked says whether a voucher read unlocked has rules that read
// redemption counts.
func countsUnlocked(cs []*Candidate) bool {
	for _, c := range cs {
		if c.counted && c.readsCounts && c.refusal == nil {
			return true
		}
	}
	return false
}

// failure is the answer to a refused redemption: the first inapplicable
// redeemable's error, naming it.
func failure(o *outcome) error {
	for i, c := range o.cs {
		if o.status[i] == "INAPPLICABLE" {
			f := c.refusal
			return apierr.New(f.Code, f.Key, f.Message, fmt.Sprintf("%s %s: %s", c.req.Object, c.req.ID, f.Details))
		}
	}
	return apierr.InvalidPayload("no redeemable applies")
}

// customerRef is the customer object a redemption shows.
func customerRef(c *customers.Customer) map[string]any {
	if c == nil {
		return nil
	}
	v := c.View()
	return map[string]any{"id": v.ID, "source_id": v.SourceID, "name": v.Name, "email": v.Email, "metadata": v.Metadata,
		"object": "customer"}
}

// records are the redemptions of an outcome: the parent and one child per
// redeemable, each with the view the API answers.
func (e *Engine) records(r *Request, o *outcome, cust *customers.Customer, orderView *calc.OrderView, now time.Time,
	result, status string) (stacked.Redemption, []stacked.Redemption) {
	parentID := ids.New("r_")
	var custID *string
	if cust != nil && cust.ID != "" {
		custID = &cust.ID
	}
	orderID := orderView.ID
	meta := r.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	base := func(id string) map[string]any {
		return map[string]any{"id": id, "object": "redemption", "date": jsonx.Time{Time: now}, "customer_id": custID,
			"tracking_id": r.TrackingID, "metadata": meta, "result": result, "status": status, "order": orderView,
			"channel": map[string]any{"channel_type": "API", "channel_id": nil}, "customer": customerRef(cust)}
	}
	var kids []stacked.Redemption
	var related []any
	var total int64
	for i, c := range o.cs {
		if result == "SUCCESS" && o.status[i] != "APPLICABLE" {
			continue // PARTIAL: what did not apply is answered, not redeemed
		}
		id := ids.New("r_")
		v := base(id)
		v["redemption"] = parentID
		x := stacked.Redemption{ID: id, ParentID: &parentID, ObjectType: c.req.Object, CustomerID: custID, OrderID: orderID,
			TrackingID: r.TrackingID, Result: result, Status: status, View: v, CreatedAt: now}
		oid := c.ObjectID()
		if oid != "" {
			x.ObjectID = &oid
		}
		if c.campaign != nil {
			x.CampaignID, x.CampaignNm = &c.campaign.ID, &c.campaign.Name
		}
		v["related_object_type"], v["related_object_id"] = c.req.Object, oid
		switch {
		case c.voucher != nil:
			code := c.voucher.Code
			x.Code = &code
			vv := c.voucher.View()
			v["voucher"] = vv
		case c.tier != nil:
			v["promotion_tier"] = map[string]any{"id": c.tier.ID, "name": c.tier.Name, "campaign_id": c.tier.CampaignID,
				"hierarchy": c.tier.Hierarchy, "metadata": c.tier.Metadata, "object": "promotion_tier"}
		case c.card != nil:
			code := c.card.Card.Code
			x.Code = &code
			v["voucher"], v["reward"] = c.card.Card.View(c.card.Card.Campaign), c.card.RewardRef()
		}
		if result == "SUCCESS" {
			ef := o.effects[i]
			x.Amount = ef.Discount
			v["amount"], v["order"] = ef.Discount, ef.Order
			if ef.Credits > 0 {
				x.GiftAmount = ef.Credits
				v["gift"] = map[string]any{"amount": ef.Credits}
			}
			if c.card != nil {
				v["loyalty_card"] = map[string]any{"points": ef.Points}
			}
			total += ef.Discount
		} else {
			code, msg := "preceding_validation_failed", "Preceding validation failed"
			if c.refusal != nil {
				code, msg = c.refusal.Key, c.refusal.Details
			} else if d := o.skip[i]; d != nil {
				code, msg = d["key"].(string), d["message"].(string)
			}
			x.FailureCode = &code
			v["amount"], v["failure_code"], v["failure_message"] = int64(0), code, msg
		}
		related = append(related, map[string]any{"id": id, "date": jsonx.Time{Time: now}})
		kids = append(kids, x)
	}
	pv := base(parentID)
	pv["redemption"], pv["amount"] = nil, total
	pv["related_object_type"], pv["related_object_id"] = "redemption", parentID
	pv["related_redemptions"] = map[string]any{"redemptions": related, "rollbacks": []any{}}
	parent := stacked.Redemption{ID: parentID, ObjectType: "redemption", CustomerID: custID, OrderID: orderID, TrackingID: r.TrackingID,
		Result: result, Status: status, Amount: total, View: pv, CreatedAt: now}
	if result == "FAILURE" {
		code := *kids[firstFailed(o)].FailureCode
		parent.FailureCode = &code
		pv["failure_code"], pv["failure_message"] = code, kids[firstFailed(o)].View["failure_message"]
	}
	return parent, kids
}

func firstFailed(o *outcome) int {
	for i := range o.cs {
		if o.status[i] == "INAPPLICABLE" {
			return i
		}
	}
	return 0
}

// storeFailure records a refused attempt: FAILURE redemptions, and
// redemption.failed for each, queued onto the batch it answers (sent with
// the COMMIT).
func (e *Engine) storeFailure(ctx context.Context, projectID string, r *Request, o *outcome,
	cust *customers.Customer, now time.Time) (*pgx.Batch, error) {
	parent, kids := e.records(r, o, cust, o.order, now, "FAILURE", "FAILED")
	b := &pgx.Batch{}
	all := append([]stacked.Redemption{parent}, kids...)
	if err := stacked.QueueInsert(b, projectID, all); err != nil {
		return nil, err
	}
	kids = all[1:] // with their views as stored
	return b, e.queueNotices(ctx, b, projectID, EventRedemptionFailed, kids)
}

func (e *Engine) queueNotices(ctx context.Context, b *pgx.Batch, projectID, event string, rs []stacked.Redemption) error {
	if e.Notify == nil {
		return nil
	}
	for _, x := range rs {
		if err := e.Notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: event, Entity: x.ID,
			Object: map[string]any{"redemption": x.Answer()}}); err != nil {
			return err
		}
	}
	return nil
}

// storeSuccess applies an outcome every redeemable of which applies: the
// order (with its discounts), the vouchers' counts and credits, the
// session's end, the redemptions and their notices, queued onto the batch
// it answers, which is sent with the COMMIT. paid says the order became
// PAID.
func (e *Engine) storeSuccess(ctx context.Context, tx pgx.Tx, projectID string, r *Request, o *outcome,
	cust *customers.Customer, key string, countLocked bool, now time.Time) (map[string]any, bool, *pgx.Batch, error) {
	orderView, paid := o.order, false
	b := &pgx.Batch{}
	if r.Order != nil {
		w := *r.Order
		amount, discount := orderView.Amount, orderView.TotalDiscountAmount
		w.Amount, w.DiscountAmount, w.Items = &amount, &discount, nil
		for _, it := range orderView.Items {
			w.Items = append(w.Items, it.Request())
		}
		if cust != nil && len(w.Customer) == 0 && w.CustomerID == nil {
			w.CustomerID = &cust.ID
		}
		// First in the batch: orders come before the counts (Lock order, 5).
		saved, p, err := e.Orders.QueueWriteIn(ctx, tx, b, projectID, w, cust)
		if err != nil {
			return nil, false, nil, err
		}
		paid = p
		orderView.ID, orderView.CreatedAt, orderView.CustomerID = &saved.ID, &saved.CreatedAt, saved.CustomerID
		if saved.Status != "" {
			orderView.Status = &saved.Status
		}
	}
	parent, kids := e.records(r, o, cust, orderView, now, "SUCCESS", "SUCCEEDED")
	var held []string
	var counted []*Candidate
	var stock []rewards.Count
	k := -1
	for i, c := range o.cs {
		if o.status[i] != "APPLICABLE" {
			continue
		}
		k++
		if p := c.card; p != nil {
			// A COIN reward that pays nothing takes nothing; any other
			// reward is a unit of its stock and an entry, whatever its
			// price (a tier may make it 0).
			if pts := o.effects[i].Points; pts > 0 || !p.IsCoin() {
				var ref map[string]any
				if orderView.ID != nil {
					ref = map[string]any{"id": *orderView.ID, "source_id": orderView.SourceID}
				}
				taken, err := e.Redemptions.QueuePay(ctx, tx, b, projectID, p, pts, kids[k].ID, ref, now)
				if err != nil {
					return nil, false, nil, err
				}
				if taken.Issued != nil {
					kids[k].View["reward"].(map[string]any)["voucher"] = taken.Given
				}
				kids[k].CardPayment = &taken
				stock = append(stock, p.Reward.Count)
			}
			kids[k].View["voucher"] = p.Card.View(p.Card.Campaign) // as the redemption left it
			continue
		}
		v := c.voucher
		if v == nil {
			continue
		}
		held = append(held, v.ID)
		if c.counted {
			counted = append(counted, c)
			countLocked = countLocked || countsOnRow(v)
		} else {
			vouchers.QueueRedeemed(b, projectID, v.ID, 1, now)
		}
		v.Redeemed++ // as read, plus this one: exact when no one else redeemed it meanwhile
		if ef := o.effects[i]; ef.Credits > 0 {
			if _, err := e.Vouchers.QueueCredits(ctx, b, projectID, v, -ef.Credits, loyalty.CreditsRedemption, &kids[k].ID, now); err != nil {
				return nil, false, nil, err
			}
		}
		kids[k].View["voucher"] = v.View() // as the redemption left it
	}
	if len(held) > 0 {
		queueEndSessions(b, projectID, held, key, now)
	}
	all := append([]stacked.Redemption{parent}, kids...)
	if err := stacked.QueueInsert(b, projectID, all); err != nil {
		return nil, false, nil, err
	}
	parent, kids = all[0], all[1:] // with their views as stored, answered and notified as they are
	if err := e.queueNotices(ctx, b, projectID, EventRedemptionSucceeded, kids); err != nil {
		return nil, false, nil, err
	}
	// The discount vouchers are counted now, in code order, each holding
	// a counter shard's row (or its own) only from here to the commit.
	b, err := countVouchers(ctx, tx, b, projectID, counted, countLocked, now)
	if err != nil {
		return nil, false, nil, err
	}
	// Last, in reward id order (one order of row locks for every
	// redemption): a reward with a stock updates its row and holds its
	// lock to the commit, rewards_in_stock refusing one past the stock;
	// one without adds to a shard (rewards.Count).
	redemptions.QueueStock(b, projectID, stock, +1)
	if b, err = e.convertReferees(ctx, tx, b, projectID, o, kids, cust); err != nil {
		return nil, false, nil, err
	}
	views := make([]any, len(kids))
	for i, k := range kids {
		views[i] = k.Answer()
	}
	answer := o.view(r)
	return map[string]any{"redemptions": views, "parent_redemption": parent.Answer(), "order": orderView,
		"inapplicable_redeemables": answer["inapplicable_redeemables"], "skipped_redeemables": answer["skipped_redeemables"]}, paid, b, nil
}

// convertReferees converts the redemption's customer through each referral
// code it redeemed (a referrer's published code; the referrer's own was
// refused by check), in the redemption's transaction, as a custom event
// converts: once per referee and program. A rollback of the redemption
// leaves the conversion standing (README: Referral programs). The
// redemption's batch b is sent before the first conversion; it answers the
// batch the COMMIT goes with.
func (e *Engine) convertReferees(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID string, o *outcome, kids []stacked.Redemption,
	cust *customers.Customer) (*pgx.Batch, error) {
	if e.referrals == nil || cust == nil || cust.ID == "" {
		return b, nil
	}
	k := -1
	for i, c := range o.cs {
		if o.status[i] != "APPLICABLE" {
			continue
		}
		k++
		v := c.voucher
		if v == nil || c.campaign == nil || c.campaign.CampaignType != "REFERRAL_PROGRAM" || v.HolderID == nil {
			continue
		}
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return nil, err
			}
			b = &pgx.Batch{}
		}
		if err := e.referrals.ConvertRedemption(ctx, tx, projectID, v.Code, cust.ID, kids[k].ID, kids[k].View); err != nil {
			return nil, err
		}
	}
	return b, nil
}
