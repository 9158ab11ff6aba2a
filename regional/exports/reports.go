package exports

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/dltoken"
)

// ReportObject is the exported_object of a bulk job's report: an export
// row and file of its own kind, so that the report is kept, signed,
// downloaded (from the cluster's download host, as text/csv or
// text/plain), erased and swept at its retention exactly as an export's
// file is. The /v1/exports routes neither list, read nor delete it: the
// reference knows no such export, and its only link is the job's result.
const ReportObject = "report"

// Reports writes the report files of the bulk jobs whose results carry
// `reports` and `reports_available_till` (CUSTOMERS.BULK_UPDATE,
// PRODUCTS.BULK_UPDATE, VOUCHERS.BULK_UPDATE): a CSV of each item's outcome, appended in the
// transaction that writes the items, so a job run again after its worker
// died goes on with its report where the last committed chunk left it.
type Reports struct {
	pool   *db.Pool
	clock  *clock.Clock
	tokens dltoken.Keys
	opt    Options
}

// NewReports makes the report writer. It needs only the database and
// the link's keys, so the jobs that write reports (customers) can have
// it before the export service, which is built on the loyalty program,
// which is built on them. o's Retention is a report's too.
func NewReports(pool *db.Pool, clk *clock.Clock, tokens dltoken.Keys, o Options) *Reports {
	if o.Retention <= 0 {
		o.Retention = 30 * 24 * time.Hour
	}
	return &Reports{pool: pool, clock: clk, tokens: tokens, opt: o}
}

// ReportID is the report of async action actionID: one per action, found
// again by a rerun of its job.
func ReportID(actionID string) string { return "exp_" + strings.TrimPrefix(actionID, "aa_") }

// Append writes records to the end of the report of actionID in tx, and
// returns the report's new size. offset is the size the job's checkpoint
// says the report had: at 0 it makes the report (IN_PROGRESS until Finish)
// and writes header first; past it the records go at the file's end, read
// from its chunks, which a permanent deletion's redaction of the report
// (redactReport) may have made shorter than the checkpoint says.
func (r *Reports) Append(ctx context.Context, tx pgx.Tx, projectID, actionID string, offset int64, header []string,
	records [][]string) (int64, error) {
	id := ReportID(actionID)
	var data []byte
	if offset > 0 {
		err := tx.QueryRow(ctx, `SELECT offset_bytes + octet_length(data) FROM export_chunks WHERE project_id = $1 AND export_id = $2
			AND run_id = $3 AND part = 0 ORDER BY offset_bytes DESC LIMIT 1`, projectID, id, actionID).Scan(&offset)
		if err != nil && !errors.Is(err, db.ErrNotFound) && !errors.Is(err, pgx.ErrNoRows) {
			return 0, err
		}
	}
	if offset == 0 {
		now := r.clock.Now().UTC().Truncate(time.Millisecond)
		if _, err := tx.Exec(ctx, `INSERT INTO exports (project_id, id, exported_object, status, channel, parameters, action_id,
			run_id, created_at, expires_at) VALUES ($1, $2, $3, $4, 'API', '{}', $5, $5, $6, $7)`,
			projectID, id, ReportObject, InProgress, actionID, now, now.Add(r.opt.Retention)); err != nil {
			return 0, err
		}
		data = appendRecord(data, header)
	}
	for _, rec := range records {
		data = appendRecord(data, rec)
	}
	if len(data) == 0 {
		return offset, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO export_chunks (project_id, export_id, run_id, part, offset_bytes, data)
		VALUES ($1, $2, $3, 0, $4, $5)`, projectID, id, actionID, offset, data); err != nil {
		return 0, err
	}
	return offset + int64(len(data)), nil
}

// Finish marks the report of actionID DONE with rows rows, and returns its
// link, good until the report is swept, and that time. Its size is its
// file's, summed in the statement that finishes it: size, what the job
// wrote, is more when a permanent deletion has redacted the report since.
// No link is a report gone meanwhile (swept, or stopped by a deletion
// before reports were redacted rather than stopped). Run again, it
// finishes the report again.
func (r *Reports) Finish(ctx context.Context, projectID, actionID string, rows, _ int64) (urls []string, till *time.Time, err error) {
	id := ReportID(actionID)
	var expires time.Time
	// Serializable: a redaction committed between this statement's
	// snapshot and its update of the row fails it, and it is tried again
	// with the redacted file's size.
	err = db.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `UPDATE exports SET status = $3, total_rows = $4, done_rows = $4, updated_at = $5,
		parts = jsonb_build_array(jsonb_build_object('rows', $4::INT8, 'bytes', (SELECT COALESCE(sum(octet_length(data)), 0)
			FROM export_chunks WHERE project_id = $1 AND export_id = $2 AND run_id = $6 AND part = 0)))
		WHERE project_id = $1 AND id = $2 AND run_id = $6 AND status IN ($3, $7) RETURNING expires_at`,
			projectID, id, Done, rows, r.clock.Now().UTC().Truncate(time.Millisecond), actionID, InProgress).Scan(&expires)
	})
	if errors.Is(err, db.ErrNotFound) {
		return []string{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	base, err := r.opt.DownloadURL(ctx)
	if err != nil {
		return nil, nil, err
	}
	// The link lives as long as the file: the reference shows a result's
	// report links until reports_available_till, and the result is written
	// once.
	token := r.tokens.Sign(projectID, id, expires)
	till = &expires
	return []string{fmt.Sprintf("%s/v1/exports/%s?token=%s", strings.TrimSuffix(base, "/"), id, token)}, till, nil
}

// appendRecord is one CSV line of rec, quoted as the export files are.
func appendRecord(b []byte, rec []string) []byte {
	for i, f := range rec {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendField(b, []byte(f))
	}
	return append(b, '\n')
}
