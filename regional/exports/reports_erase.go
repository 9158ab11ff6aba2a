package exports

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/regional/erasure"
)

// reportChunk is a stored chunk of a report's file: where it starts, and
// its bytes (whole CSV records: Append writes a chunk of them at a time).
type reportChunk struct {
	offset int64
	data   []byte
}

// redactReport takes s's values out of the file of a report's run, in
// progress or finished, instead of deleting it as an export's file is: a
// report is the outcome of every item of its job, which the job's result
// links, and its other rows are no one's personal data. Every field that
// holds one of the values loses it (erasure.Subject.RedactText); the
// chunks from the first that changed on are written again at their new
// offsets, and a finished report's size is made the file's. A job still
// appending to it reads the file's end from its chunks (Append), and the
// two are serializable transactions over the same chunks: one of them is
// tried again after the other, so no append lands at a stale offset.
func redactReport(ctx context.Context, tx pgx.Tx, run runRef, s erasure.Subject) error {
	projectID, id := run.Project, run.Export
	rows, err := tx.Query(ctx, `SELECT offset_bytes, data FROM export_chunks WHERE project_id = $1 AND export_id = $2 AND run_id = $3
		AND part = 0 ORDER BY offset_bytes`, projectID, id, run.Run)
	if err != nil {
		return err
	}
	var chunks []reportChunk
	var c reportChunk
	if _, err := pgx.ForEachRow(rows, []any{&c.offset, &c.data}, func() error {
		chunks = append(chunks, reportChunk{c.offset, bytes.Clone(c.data)})
		return nil
	}); err != nil {
		return err
	}
	first := -1
	for i := range chunks {
		if !s.InFile(chunks[i].data) {
			continue
		}
		out, changed, err := redactCSV(chunks[i].data, s)
		if err != nil {
			return fmt.Errorf("exports: report %s: %w", id, err)
		}
		if changed {
			chunks[i].data = out
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM export_chunks WHERE project_id = $1 AND export_id = $2 AND run_id = $3 AND part = 0 AND offset_bytes >= $4`,
		projectID, id, run.Run, chunks[first].offset)
	at := chunks[first].offset
	for _, c := range chunks[first:] {
		b.Queue(`INSERT INTO export_chunks (project_id, export_id, run_id, part, offset_bytes, data) VALUES ($1, $2, $3, 0, $4, $5)`,
			projectID, id, run.Run, at, c.data)
		at += int64(len(c.data))
	}
	// A finished report's one part is the file: its size is the new one.
	b.Queue(`UPDATE exports SET updated_at = $4, parts = CASE WHEN parts IS NULL THEN NULL ELSE
		jsonb_build_array(jsonb_build_object('rows', total_rows, 'bytes', $5::INT8)) END
		WHERE project_id = $1 AND id = $2 AND run_id = $3`, projectID, id, run.Run, time.Now().UTC().Truncate(time.Millisecond), at)
	return tx.SendBatch(ctx, b).Close()
}

// redactCSV is data (whole CSV records) without s's values in any field,
// and without the reason of a failed item that named her.
func redactCSV(data []byte, s erasure.Subject) ([]byte, bool, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	var out []byte
	changed := false
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, changed, nil
		}
		if err != nil {
			return nil, false, err
		}
		named := false
		for i, f := range rec {
			if x, did := s.RedactText(f); did {
				rec[i], named = x, true
			}
		}
		// A failed item of hers (async.ReportLine: row, key, FAILED,
		// reason) says only that she was erased: its reason may quote what
		// it asked to write for her (a metadata value a schema refused).
		if named && len(rec) == 4 && rec[2] == "FAILED" {
			rec[3] = erasure.ErasedItem
		}
		changed = changed || named
		out = appendRecord(out, rec)
	}
}
