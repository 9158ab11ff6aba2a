package async

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/jsonx"
)

// Reports writes the report files of bulk jobs (exports.Reports, given to
// the jobs' owners at construction): the outcome of each item, appended in
// the transaction that writes the items, and finished with the job. The
// reference's results of CUSTOMERS.BULK_UPDATE, PRODUCTS.BULK_UPDATE and
// VOUCHERS.BULK_UPDATE link them (reports, reports_available_till).
type Reports interface {
	Append(ctx context.Context, tx pgx.Tx, projectID, actionID string, offset int64, header []string, records [][]string) (int64, error)
	Finish(ctx context.Context, projectID, actionID string, rows, size int64) (urls []string, till *time.Time, err error)
}

// ReportHeader is the first line of a bulk job's report: each item's row
// (its index + 1), its key (key: source_id, code), its outcome (SUCCESS or
// FAILED) and, for a failure, why. The reference shows the report's link,
// not its columns.
func ReportHeader(key string) []string { return []string{"row", key, "status", "reason"} }

// ReportLine is an item's line of a report: SUCCESS without a reason,
// FAILED with one.
func ReportLine(row int, key, reason string) []string {
	status := "SUCCESS"
	if reason != "" {
		status = "FAILED"
	}
	return []string{strconv.Itoa(row), key, status, reason}
}

// Report appends lines to the job's report in tx (a chunk's transaction),
// after what the checkpoint c says it holds, and moves c past them; the
// items' key is named key in the report's header.
func (c *Chunked[F]) Report(ctx context.Context, tx pgx.Tx, r Reports, job *Job, key string, lines [][]string) error {
	n, err := r.Append(ctx, tx, job.ProjectID, job.ActionID, c.ReportBytes, ReportHeader(key), lines)
	if err == nil {
		c.ReportBytes = n
	}
	return err
}

// FinishReport finishes the job's report, a line for each item committed
// (all of them, once RunChunks is done), and sets its links in result:
// reports (none if the report is gone, taken by a permanent deletion) and
// reports_available_till.
func (c *Chunked[F]) FinishReport(ctx context.Context, r Reports, job *Job, result map[string]any) error {
	urls, till, err := r.Finish(ctx, job.ProjectID, job.ActionID, int64(c.Next), c.ReportBytes)
	if err != nil {
		return err
	}
	result["reports"], result["reports_available_till"] = urls, jsonx.Ptr(till)
	return nil
}
