package campaigns

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/regional/loyalty"
)

// summary serves GET /v1/campaigns/{campaignId}/summary: the campaign and
// its figures within start_date and end_date (days, both included), in the
// shape of its type. Validations and the redemptions of discount, gift and
// referral vouchers are issue 19's (not served yet): they count 0, as no
// such validation or redemption can have happened.
func (h handler) summary(c echo.Context) error {
	ctx, project := c.Request().Context(), httpx.ProjectID(c)
	var p loyalty.Period
	for _, b := range []struct {
		name string
		dst  **time.Time
		add  int
	}{{"start_date", &p.From, 0}, {"end_date", &p.To, 1}} {
		if v := c.QueryParam(b.name); v != "" {
			d, err := time.Parse(time.DateOnly, v)
			if err != nil {
				return apierr.InvalidQuery(b.name, "must be a date, YYYY-MM-DD")
			}
			d = d.AddDate(0, 0, b.add)
			*b.dst = &d
		}
	}
	if p.From != nil && p.To != nil && !p.To.After(*p.From) {
		return apierr.InvalidQuery("end_date", "must not be before start_date")
	}
	id, typ, k, err := h.kindOf(ctx, project, c.Param("campaignId"))
	if err != nil {
		return err
	}
	view, err := k.Get(ctx, project, id)
	if err != nil {
		return err
	}
	s := map[string]any{"object": "campaign_summary", "campaign": view}
	for _, f := range []string{"redemptions", "redemptions_succeeded", "redemptions_failed", "rollbacks", "rollbacks_succeeded",
		"rollbacks_failed", "validations", "validations_succeeded", "validations_failed", "orders_amount", "orders_rolledback_amount"} {
		s[f] = 0
	}
	if typ == "LOYALTY_PROGRAM" {
		red, back, err := h.Redemptions.Counts(ctx, project, id, p)
		if err != nil {
			return err
		}
		s["redemptions"], s["redemptions_succeeded"], s["rollbacks"], s["rollbacks_succeeded"] = red, red, back, back
	}
	if typ != "PROMOTION" {
		created, err := h.Vouchers.VouchersCreated(ctx, project, id, p)
		if typ == "LOYALTY_PROGRAM" {
			created, err = h.Programs.CardsCreated(ctx, project, id, p)
		}
		if err != nil {
			return err
		}
		ok, failed, err := h.Publications.Counts(ctx, project, id, p)
		if err != nil {
			return err
		}
		s["vouchers_created"], s["vouchers_deleted"] = created, 0
		s["publications"], s["publications_succeeded"], s["publications_failed"] = ok+failed, ok, failed
	}
	if typ == "REFERRAL_PROGRAM" && h.ReferredCustomers != nil {
		n, err := h.ReferredCustomers(ctx, project, id, p)
		if err != nil {
			return err
		}
		s["referred_customers"] = n
	}
	if typ == "DISCOUNT_COUPONS" || typ == "PROMOTION" {
		s["discounted_amount"], s["rolledback_discounted_amount"] = 0, 0
	}
	if typ == "GIFT_VOUCHERS" || typ == "LOYALTY_PROGRAM" {
		sums, err := h.Programs.LedgerSums(ctx, project, id, p)
		if err != nil {
			return err
		}
		if typ == "GIFT_VOUCHERS" {
			s["created_vouchers_amount"], s["amount_added"], s["amount_subtracted"] = sums[loyalty.Opening], sums[loyalty.CreditsAddition], -sums[loyalty.CreditsRemoval]
			s["amount_deleted"], s["amount_redeemed"], s["amount_rolledback"] = 0, 0, 0
		} else {
			for f, t := range map[string]string{"points_added": loyalty.PointsAddition, "points_subtracted": loyalty.PointsRemoval,
				"points_rewarded": loyalty.PointsAccrual, "points_redeemed": loyalty.PointsRedemption, "points_rolledback": loyalty.PointsRefund,
				"points_expired": loyalty.PointsExpiration, "points_transferred_out": loyalty.PointsTransferOut,
				"points_transferred_in": loyalty.PointsTransferIn} {
				s[f] = abs(sums[t])
			}
			s["created_vouchers_points"], s["points_deleted"] = 0, 0
			s["pending_points_added"], s["pending_points_subtracted"], s["pending_points_activated"], s["pending_points_canceled"] = 0, 0, abs(sums[loyalty.PendingPointsActivation]), 0
		}
	}
	return c.JSON(http.StatusOK, s)
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
