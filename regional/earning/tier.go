package earning

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/tiers"
)

// TierRules are the rules of a tier's program that earn for the tier's
// members, as the tier maps them (GET
// /v1/loyalties/{campaignId}/tiers/{tierId}/earning-rules): the rules
// scoped to any tier or to this one, oldest first, each one's points as
// the tier maps the rule (a FIXED rule's points, a proportional rule's
// points for every so much; the points earned are the rule's total mapped,
// rounded down once).
func (s *Service) TierRules(ctx context.Context, ref campaigns.ItemRef, lq listq.Query) ([]RuleView, int, error) {
	camp, err := s.prog.Campaign(ctx, s.pool, ref.Project, ref.Campaign)
	if err != nil {
		return nil, 0, err
	}
	tier, err := tiers.Find(ctx, s.pool, campaigns.ItemRef{Project: ref.Project, Campaign: camp.ID, ID: ref.ID})
	if err != nil {
		return nil, 0, err
	}
	rs, err := rulesOf(ctx, s.pool, ref.Project, camp.ID, "")
	if err != nil {
		return nil, 0, err
	}
	var mine []EarningRule
	for _, r := range rs {
		if r.inTier(&tier) {
			mine = append(mine, r)
		}
	}
	page, _ := listq.Window(mine, lq)
	vs := make([]RuleView, 0, len(page))
	for _, r := range page {
		v := r.View()
		if m, ok := tier.RuleMapping(r.ID); ok {
			v.Loyalty = v.Loyalty.mapped(m)
		}
		vs = append(vs, v)
	}
	return vs, len(mine), nil
}

// mapped is p with its points as mapping m gives them: a copy, p's
// pointers untouched (they are the stored rule's).
func (p RulePoints) mapped(m tiers.Mapping) RulePoints {
	apply := func(n int64) int64 { return m.Apply(n) }
	if p.Points != nil {
		p.Points = ptr(apply(*p.Points))
	}
	if o := p.Order; o != nil {
		c := *o
		for _, e := range []**Every{&c.Amount, &c.TotalAmount} {
			if *e != nil {
				*e = &Every{Every: (*e).Every, Points: apply((*e).Points)}
			}
		}
		p.Order = &c
	}
	for _, md := range []**RuleEventMetadata{&p.CustomEvent, &p.Customer} {
		if *md != nil && (*md).Metadata != nil {
			e := *(*md).Metadata
			e.Points = apply(e.Points)
			*md = &RuleEventMetadata{Metadata: &e}
		}
	}
	return p
}

func registerTierRules(g *echo.Group, h handler) {
	g.GET("/loyalties/:campaignId/tiers/:tierId/earning-rules", func(c echo.Context) error {
		// The reference pages it by limit and page, with no order.
		return httpx.WithList(c, listq.Spec{Pages: true, NoCursor: true}, func(lq listq.Query) (any, error) {
			vs, total, err := h.svc.TierRules(c.Request().Context(), campaigns.ItemRefOf(c, "tierId"), lq)
			return listq.List[RuleView]{Data: vs, Total: &total, More: total > lq.Offset()+len(vs)}, err
		})
	})
}
