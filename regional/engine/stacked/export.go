package stacked

// ExportRows is the SELECT of project $1's stacked redemptions'
// redeemables (SUCCESS or FAILURE; a parent is not a row) as the
// redemption export reads them beside the loyalty reward redemptions, in
// its columns' order: id, created_at, code, campaign_id,
// promotion_tier_id, customer_id, tracking_id, order_id, gift_amount,
// points, result, failure_code, failure_message, metadata.
const ExportRows = `SELECT r.id, r.created_at, r.code, r.campaign_id,
		CASE WHEN r.object_type = 'promotion_tier' THEN r.object_id END AS promotion_tier_id, r.customer_id,
		r.tracking_id, r.order_id, r.gift_amount, CAST(r.card_payment->>'points' AS INT8) AS points, r.result,
		r.failure_code, r.view->>'failure_message' AS failure_message, r.view->'metadata' AS metadata
	FROM stacked_redemptions r WHERE r.project_id = $1 AND r.parent_id IS NOT NULL`
