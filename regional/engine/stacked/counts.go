package stacked

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
)

// CampaignCounts are a campaign's stacked redemptions within a period, as
// its summary (GET /v1/campaigns/{id}/summary) shows them.
type CampaignCounts = campaigns.Stacked

// CountCampaign counts the stacked redemptions of campaignID's vouchers
// and tiers made within p, and the rollbacks of its redemptions made
// within p.
func CountCampaign(ctx context.Context, q db.Querier, projectID, campaignID string, p campaigns.Period) (CampaignCounts, error) {
	var c CampaignCounts
	cond, args := p.Cond("created_at", []any{projectID, campaignID})
	err := q.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE result = 'SUCCESS'), count(*) FILTER (WHERE result = 'FAILURE'),
		COALESCE(sum(amount) FILTER (WHERE result = 'SUCCESS'), 0), COALESCE(sum(gift_amount) FILTER (WHERE result = 'SUCCESS'), 0)
		FROM stacked_redemptions WHERE project_id = $1 AND campaign_id = $2 AND parent_id IS NOT NULL`+cond, args...).
		Scan(&c.Redemptions, &c.Succeeded, &c.Failed, &c.Discounted, &c.GiftRedeemed)
	if err != nil {
		return c, err
	}
	cond, args = p.Cond("b.created_at", []any{projectID, campaignID})
	err = q.QueryRow(ctx, `SELECT count(*), COALESCE(sum(r.amount), 0), COALESCE(sum(r.gift_amount), 0)
		FROM stacked_rollbacks b JOIN stacked_redemptions r ON r.project_id = b.project_id AND r.id = b.redemption_id
		WHERE b.project_id = $1 AND r.campaign_id = $2`+cond, args...).Scan(&c.RolledBack, &c.RolledBackDiscount, &c.GiftRolledBack)
	return c, err
}

// TierSummary is a promotion tier's successful redemptions and their orders.
type TierSummary struct {
	Redeemed       int64
	OrdersAmount   int64
	DiscountAmount int64
}

// SummarizeTiers counts the standing redemptions of promotion tiers, by tier.
func SummarizeTiers(ctx context.Context, q db.Querier, projectID string, tierIDs []string) (map[string]TierSummary, error) {
	out := map[string]TierSummary{}
	rows, err := q.Query(ctx, `SELECT object_id, count(*), COALESCE(sum((view->'order'->>'amount')::INT8), 0), COALESCE(sum(amount), 0)
		FROM stacked_redemptions WHERE project_id = $1 AND object_id = ANY($2::TEXT[]) AND result = 'SUCCESS' AND status = 'SUCCEEDED'
		GROUP BY object_id`, projectID, tierIDs)
	if err != nil {
		return nil, err
	}
	var id string
	var s TierSummary
	_, err = pgx.ForEachRow(rows, []any{&id, &s.Redeemed, &s.OrdersAmount, &s.DiscountAmount}, func() error { out[id] = s; return nil })
	return out, err
}

// RuleCounts are the standing successful redemptions that validation
// rules count: of each object by one customer, and of each campaign in
// all and since a day began.
type RuleCounts struct {
	ByCustomer          map[string]int64 // by object id
	PerCampaign, PerDay map[string]int64 // by campaign id
}

// CountForRules reads, in one query, the standing successful redemptions
// of objects by custID ("" for none), and of campaigns in all and since
// day.
func CountForRules(ctx context.Context, q db.Querier, projectID, custID string, objects, campaigns []string, day time.Time) (RuleCounts, error) {
	// Two index reads (by object, by campaign) rather than one OR, which
	// would read the whole table; UNION drops the rows both find.
	rows, err := q.Query(ctx, `SELECT COALESCE(object_id, ''), COALESCE(campaign_id, ''), customer_id = $2 AND customer_id <> '', created_at >= $3, count(*)
		FROM (SELECT id, object_id, campaign_id, customer_id, created_at FROM stacked_redemptions
				WHERE project_id = $1 AND object_id = ANY($4::TEXT[]) AND parent_id IS NOT NULL AND result = 'SUCCESS' AND status = 'SUCCEEDED'
			UNION SELECT id, object_id, campaign_id, customer_id, created_at FROM stacked_redemptions
				WHERE project_id = $1 AND campaign_id = ANY($5::TEXT[]) AND parent_id IS NOT NULL AND result = 'SUCCESS' AND status = 'SUCCEEDED') AS r
		GROUP BY 1, 2, 3, 4`, projectID, custID, day, objects, campaigns)
	c := RuleCounts{ByCustomer: map[string]int64{}, PerCampaign: map[string]int64{}, PerDay: map[string]int64{}}
	if err != nil {
		return c, err
	}
	var obj, camp string
	var isMine *bool
	var isToday bool
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&obj, &camp, &isMine, &isToday, &n}, func() error {
		if isMine != nil && *isMine {
			c.ByCustomer[obj] += n
		}
		c.PerCampaign[camp] += n
		if isToday {
			c.PerDay[camp] += n
		}
		return nil
	})
	return c, err
}
