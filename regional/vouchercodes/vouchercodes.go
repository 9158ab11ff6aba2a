// Package vouchercodes owns the registry of codes (voucher_codes): one row
// a code, so that a code is unique in a project across every voucher type,
// discount vouchers and gift cards (regional/vouchers) and loyalty cards
// (regional/loyalty) alike. It sits below both, so each takes its codes
// in the statement that writes its own rows, one round trip, and no other
// package names the table.
package vouchercodes

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// Held is a row of the registry: Code held by Voucher (the id of a
// voucher, a gift card or a loyalty card) in Project.
type Held struct {
	Project, Code, Voucher string
}

// Take takes h.Code for h.Voucher in the project's registry; false when
// another voucher holds it already.
func Take(ctx context.Context, q db.Querier, h Held) (bool, error) {
	tag, err := q.Exec(ctx, `INSERT INTO voucher_codes (project_id, code, voucher_id) VALUES ($1, $2, $3)
		ON CONFLICT (project_id, code) DO NOTHING`, h.Project, h.Code, h.Voucher)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// Reserve is a WITH clause, `reg`, that takes many codes at once for the
// statement that follows it: the pairs of the text arrays at placeholders
// ids and codes, in the project at placeholder project. A code already
// held is skipped; reg's rows (voucher_id, code) are the pairs taken, which
// the statement inserts, so that a row is written only with its code.
func Reserve(project, ids, codes int) string {
	return fmt.Sprintf(`WITH reg AS (
		INSERT INTO voucher_codes (project_id, code, voucher_id)
		SELECT $%d, x.code, x.id FROM unnest($%d::TEXT[], $%d::TEXT[]) AS x(id, code)
		ON CONFLICT (project_id, code) DO NOTHING RETURNING voucher_id, code)
	`, project, ids, codes)
}

// QueueFree frees the codes of deleted vouchers in b: voucherIDs[i] held
// codes[i]. The registry's key is the code; the voucher id keeps a code
// that has since gone to another voucher where it is.
func QueueFree(b *pgx.Batch, projectID string, voucherIDs, codes []string) {
	b.Queue(`DELETE FROM voucher_codes WHERE project_id = $1 AND code = ANY($3::TEXT[]) AND voucher_id = ANY($2::TEXT[])`,
		projectID, voucherIDs, codes)
}
