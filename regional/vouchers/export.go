package vouchers

// ExportRows is the SELECT of the project $1's vouchers (discount and
// gift, not those in the bin) as rows of the voucher export, which UNIONs
// them with loyalty.ExportCardRows: id, code, voucher_type, campaign_id,
// attrs, metadata, category, active, redemption_quantity,
// redeemed_quantity, holder_id, points (NULL), created_at, updated_at.
const ExportRows = `SELECT v.id, v.code, v.type AS voucher_type, v.campaign_id, v.attrs, v.attrs->'metadata' AS metadata,
				v.category, v.active, v.redemption_quantity, ` + redeemedColumn + ` AS redeemed_quantity, v.holder_id, CAST(NULL AS INT8) AS points,
				v.created_at, v.updated_at
			FROM vouchers v WHERE v.project_id = $1 AND v.bin_id IS NULL`
