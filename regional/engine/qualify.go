package engine

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/vouchers"
)

// QualificationRequest is the body of POST /v1/qualifications.
type QualificationRequest struct {
	Customer   *customers.Patch `json:"customer"`
	Order      *orders.Request  `json:"order"`
	TrackingID *string          `json:"tracking_id"`
	Scenario   *string          `json:"scenario"`
	Options    *struct {
		Limit         *int            `json:"limit"`
		StartingAfter *time.Time      `json:"starting_after"`
		SortingRule   *string         `json:"sorting_rule"`
		Expand        []string        `json:"expand"`
		Filters       json.RawMessage `json:"filters"`
	} `json:"options"`
	Metadata map[string]any  `json:"metadata"`
	Session  *SessionRequest `json:"session"`
}

// WalletLimit is how many of a customer's vouchers a qualification reads.
const WalletLimit = 1000

// Qualify is POST /v1/qualifications: which of the customer's vouchers and
// the project's promotion tiers the customer and order qualify for, each
// checked and its rules evaluated as a validation does, and each one's
// effect on the order alone. Candidates are read with two indexed queries
// (the wallet by holder, the active tiers) and judged in memory with the
// compiled rules; sorted newest first (DEFAULT), or by the discount
// (BEST_DEAL, LEAST_DEAL); paged by starting_after, a creation time.
func (e *Engine) Qualify(ctx context.Context, projectID string, r QualificationRequest) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "engine.Qualify")
	defer telemetry.End(span, &err)
	scenario := "ALL"
	if r.Scenario != nil {
		scenario = *r.Scenario
	}
	switch scenario {
	case "ALL", "CUSTOMER_WALLET":
	case "AUDIENCE_ONLY", "PRODUCTS", "PRODUCTS_DISCOUNT", "PROMOTION_STACKS", "PRODUCTS_BY_CUSTOMER", "PRODUCTS_DISCOUNT_BY_CUSTOMER":
		return nil, apierr.New(400, "feature_not_available", "Feature not available",
			"scenario "+scenario+" is not served yet: ALL and CUSTOMER_WALLET are")
	default:
		return nil, apierr.InvalidPayload("scenario must be one of ALL, CUSTOMER_WALLET, AUDIENCE_ONLY, PRODUCTS, PRODUCTS_DISCOUNT, " +
			"PROMOTION_STACKS, PRODUCTS_BY_CUSTOMER, PRODUCTS_DISCOUNT_BY_CUSTOMER")
	}
	limit, sorting := 5, "DEFAULT"
	var after *time.Time
	if o := r.Options; o != nil {
		if o.Limit != nil {
			if *o.Limit < 1 || *o.Limit > 50 {
				return nil, apierr.InvalidPayload("options.limit must be from 1 to 50")
			}
			limit = *o.Limit
		}
		if o.SortingRule != nil {
			switch sorting = *o.SortingRule; sorting {
			case "DEFAULT", "BEST_DEAL", "LEAST_DEAL":
			default:
				return nil, apierr.InvalidPayload("options.sorting_rule must be DEFAULT, BEST_DEAL or LEAST_DEAL")
			}
		}
		if present(o.Filters) {
			return nil, apierr.New(400, "feature_not_available", "Feature not available", "options.filters are not served yet")
		}
		after = o.StartingAfter
	}
	if r.Order != nil {
		items, err := orders.NormalizeItems(r.Order.Items)
		if err != nil {
			return nil, err
		}
		r.Order.Items = items
	}
	now := e.now()
	cust, err := e.readCustomer(ctx, projectID, r.Customer)
	if err != nil {
		return nil, err
	}
	var cs []*candidate
	if cust != nil && cust.ID != "" {
		wallet, err := vouchers.HeldBy(ctx, e.pool, projectID, cust.ID, WalletLimit)
		if err != nil {
			return nil, err
		}
		for i := range wallet {
			if v := &wallet[i]; v.Type == vouchers.Discount || v.Type == vouchers.Gift {
				cs = append(cs, &candidate{req: Redeemable{Object: "voucher", ID: v.Code}, voucher: v})
			}
		}
	}
	var pre *catalogue
	if scenario == "ALL" {
		if pre, err = e.catalogue(ctx, e.pool, projectID, now); err != nil {
			return nil, err
		}
		for i := range pre.tiers {
			t := pre.tiers[i] // candidates are changed by judging: each its own copy
			cs = append(cs, &candidate{req: Redeemable{Object: "promotion_tier", ID: t.ID}, tier: &t})
		}
	}
	if err := e.judgeWith(ctx, e.pool, projectID, r.Order, r.Metadata, cust, cs, "", now, pre); err != nil {
		return nil, err
	}
	type qualified struct {
		c      *candidate
		at     time.Time
		effect applied
	}
	var qs []qualified
	for _, c := range cs {
		if c.refusal != nil {
			continue
		}
		at := now
		if c.voucher != nil {
			at = c.voucher.CreatedAt
		} else if c.tier.CreatedAt != nil {
			at = *c.tier.CreatedAt
		}
		if after != nil && !at.Before(*after) {
			continue
		}
		qs = append(qs, qualified{c: c, at: at})
	}
	// The deals sort by each one's discount, computed without rendering;
	// only the page's are rendered.
	if sorting != "DEFAULT" {
		for i := range qs {
			_, effects, err := e.recalcViews(ctx, e.pool, projectID, r.Order, []*candidate{qs[i].c}, false)
			if err != nil {
				return nil, err
			}
			qs[i].effect = effects[0]
		}
	}
	sort.SliceStable(qs, func(i, j int) bool {
		switch sorting {
		case "BEST_DEAL":
			return qs[i].effect.Discount > qs[j].effect.Discount
		case "LEAST_DEAL":
			return qs[i].effect.Discount < qs[j].effect.Discount
		}
		return qs[i].at.After(qs[j].at)
	})
	total, more := len(qs), len(qs) > limit
	if more {
		// The cursor is a creation time, exclusive: a page ends before a
		// run of equal times it would split (or, when the run fills it,
		// after the run), so that the next page loses none of them.
		end := limit
		if sorting == "DEFAULT" {
			for end > 0 && qs[end-1].at.Equal(qs[end].at) {
				end--
			}
			if end == 0 {
				for end = limit; end < len(qs) && qs[end].at.Equal(qs[limit-1].at); end++ {
				}
			}
		}
		qs, more = qs[:end], end < len(qs)
	}
	for i := range qs {
		_, effects, err := e.recalc(ctx, e.pool, projectID, r.Order, []*candidate{qs[i].c})
		if err != nil {
			return nil, err
		}
		qs[i].effect = effects[0]
	}
	data := make([]any, 0, len(qs))
	for _, q := range qs {
		c := q.c
		v := map[string]any{"id": c.req.ID, "object": c.req.Object, "created_at": jsonx.Time{Time: q.at},
			"result": q.effect.Result, "order": q.effect.Order, "applicable_to": emptyList(), "inapplicable_to": emptyList(),
			"metadata": map[string]any{}, "categories": []any{}}
		if c.campaign != nil {
			v["campaign_id"], v["campaign_name"] = c.campaign.ID, c.campaign.Name
		}
		if c.voucher != nil && c.voucher.Attrs.Metadata != nil {
			v["metadata"] = c.voucher.Attrs.Metadata
		}
		if c.tier != nil {
			v["name"] = c.tier.Name
			if c.tier.Metadata != nil {
				v["metadata"] = c.tier.Metadata
			}
		}
		data = append(data, v)
	}
	list := map[string]any{"object": "list", "data_ref": "data", "data": data, "total": total, "has_more": more}
	if more && len(qs) > 0 {
		list["more_starting_after"] = jsonx.Time{Time: qs[len(qs)-1].at}
	}
	rules, err := e.stackingRules(ctx, projectID)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"redeemables": list, "stacking_rules": rules, "id": ids.New("qual_")}
	if r.Order != nil {
		o, _, err := e.recalc(ctx, e.pool, projectID, r.Order, nil)
		if err != nil {
			return nil, err
		}
		out["order"] = o
	}
	if r.TrackingID != nil {
		out["tracking_id"] = *r.TrackingID
	}
	return out, nil
}
