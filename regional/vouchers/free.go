package vouchers

// freeVouchers reads, locking them, the first $3 vouchers of campaign $2
// that a publication may give (ClaimFreeN): held by no one, not in the
// bin, active. It reads the partial index of those alone (vouchers_free,
// migration 53), not the campaign's every voucher, the held ones skipped
// one by one (TestFreeVouchersAreReadFromTheirIndex).
var freeVouchers = `SELECT ` + voucherColumns + voucherFrom + `
	WHERE v.project_id = $1 AND v.campaign_id = $2 AND v.holder_id IS NULL AND v.bin_id IS NULL AND v.active
	ORDER BY v.id LIMIT $3 FOR UPDATE OF v SKIP LOCKED`
