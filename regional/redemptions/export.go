package redemptions

import "github.com/tallyhq/tally/regional/loyalty"

// ExportRows is the SELECT of project $1's loyalty reward redemptions
// (POST /v1/loyalties/members/{id}/redemption) as the redemption export
// reads them beside the stacked redemptions' redeemables, in its columns'
// order: id, created_at, code (the card's), campaign_id,
// promotion_tier_id, customer_id, tracking_id, order_id, gift_amount,
// points, result, failure_code, failure_message, metadata.
var ExportRows = `SELECT l.id, l.created_at, c.code, l.campaign_id, NULL, l.view->>'customer_id', l.view->>'tracking_id',
		l.order_id, NULL, l.points, 'SUCCESS', NULL, NULL, l.view->'metadata'
	FROM redemptions l` + loyalty.LeftJoinCard("c", "l", "l.card_id") + `
	WHERE l.project_id = $1`
