package exports

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/erasure"
)

// ErasedCode is the error code of an export whose file held a customer
// permanently deleted since.
const ErasedCode = "customer_erased"

// EraseCustomer is the erasure.Eraser of export files, run by the
// erasure task (its cost is the size of what the project retains): the
// file of every finished export is searched for the customer's personal
// values, and a file that holds one is deleted, its export turned ERROR
// with an error that says why (a new export is made without the
// customer); an export being made of objects that may hold them is
// stopped (StopRunning: one that started after the deletion's request,
// whose own StopRunning it escaped, may have read the customer's copies
// that the task has still to erase). Files are read a chunk at a time,
// each searched with the end of the one before (a value across two
// chunks is found too). Until it is done, their downloads are held
// (held).
func EraseCustomer(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, n *erasure.Counts) error {
	if err := StopRunning(ctx, tx, projectID, s, n); err != nil {
		return err
	}
	type file struct{ id, run, object string }
	rows, err := tx.Query(ctx, `SELECT id, run_id, exported_object FROM exports WHERE project_id = $1 AND run_id IS NOT NULL
		AND (status = $2 OR (status = $3 AND exported_object = $4))`, projectID, Done, InProgress, ReportObject)
	if err != nil {
		return err
	}
	var files []file
	var f file
	if _, err := pgx.ForEachRow(rows, []any{&f.id, &f.run, &f.object}, func() error { files = append(files, f); return nil }); err != nil {
		return err
	}
	overlap := 0
	for _, v := range s.Values {
		overlap = max(overlap, len(v))
	}
	for _, f := range files {
		run := runRef{Project: projectID, Export: f.id, Run: f.run}
		if f.object == ReportObject {
			// A bulk job's report, finished or being written, keeps
			// every row, the customer's values blanked.
			if err := redactReport(ctx, tx, run, s); err != nil {
				return err
			}
			continue
		}
		held, err := fileHolds(ctx, tx, run, s, overlap)
		if err != nil {
			return err
		}
		if !held {
			continue
		}
		failure, err := json.Marshal(Failure{Code: ErasedCode, Message: fmt.Sprintf(
			"The file held personal data of customer %s, permanently deleted; it was removed. Export again for a file without them.",
			s.CustomerID)})
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM export_chunks WHERE project_id = $1 AND export_id = $2`, projectID, f.id)
		b.Queue(`UPDATE exports SET status = $3, parts = NULL, error = $4, updated_at = $5 WHERE project_id = $1 AND id = $2`,
			projectID, f.id, Error, failure, time.Now().UTC().Truncate(time.Millisecond))
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	return nil
}

// personalObjects are the exported objects whose files may hold a
// customer's personal values.
var personalObjects = []string{"customer", "order", "publication", "redemption", "voucher", ReportObject}

// stoppedObjects are those of personalObjects whose exports being made a
// permanent deletion stops: all but a bulk job's report, which the
// erasure redacts (redactReport) whether finished or being written, so
// that the job still ends with its report.
var stoppedObjects = personalObjects[:len(personalObjects)-1]

// StopRunning is the erasure.Eraser of exports being made, run in the
// permanent deletion's request: it turns ERROR the exports of
// stoppedObjects being made while the customer is erased, whose rows may
// have been read before the erasure. Their run is no longer named, so the
// job finds itself superseded and drops what it wrote; nothing it made is
// ever served. An export still SCHEDULED reads after the erasure and is
// left to run. It reads the few exports a project keeps, never a file.
func StopRunning(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, _ *erasure.Counts) error {
	failure, err := json.Marshal(Failure{Code: ErasedCode, Message: fmt.Sprintf(
		"The file was being made when customer %s was permanently deleted and could hold them. Export again.", s.CustomerID)})
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE exports SET status = $2, run_id = NULL, parts = NULL, error = $3, updated_at = $4
		WHERE project_id = $1 AND status = $5 AND exported_object = ANY($6::TEXT[])`,
		projectID, Error, failure, time.Now().UTC().Truncate(time.Millisecond), InProgress, stoppedObjects)
	return err
}

// fileHolds says whether run's file holds one of s's values.
func fileHolds(ctx context.Context, tx pgx.Tx, run runRef, s erasure.Subject, overlap int) (bool, error) {
	rows, err := tx.Query(ctx, `SELECT part, data FROM export_chunks WHERE project_id = $1 AND export_id = $2 AND run_id = $3
		ORDER BY part, offset_bytes`, run.Project, run.Export, run.Run)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var tail []byte
	last := -1
	for rows.Next() {
		var part int
		var data []byte
		if err := rows.Scan(&part, &data); err != nil {
			return false, err
		}
		if part != last {
			tail, last = nil, part
		}
		if s.InFile(append(tail, data...)) {
			return true, nil
		}
		tail = append([]byte(nil), data[max(0, len(data)-overlap):]...)
	}
	return false, rows.Err()
}

// held is the answer to a download of an export of personalObjects while
// a permanent deletion's erasure task has still to search the project's
// files (async.Erasing): the file may hold the customer. Nil when no
// erasure is pending, or when the export's objects hold no customer.
func (s *Service) held(ctx context.Context, projectID string, e export) error {
	if !slices.Contains(personalObjects, e.Object) {
		return nil
	}
	pending, err := async.Erasing(ctx, s.pool, projectID)
	if err != nil || len(pending) == 0 {
		return err
	}
	return &apierr.Error{Status: http.StatusConflict, Key: "export_held", Message: "Export held",
		Details: fmt.Sprintf("A customer's permanent deletion is removing their data from this project's files; export %s "+
			"may hold them and is held until that is done, in a few seconds. Download it again then.", e.ID)}
}
