package async

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/erasure"
)

// ErasedItem is the reason a job gives for an item it did not apply
// because it names a customer permanently deleted (Skips), and the one
// the erasure gives an item of hers refused before it (EraseCustomer).
const ErasedItem = erasure.ErasedItem

// EraseInputs is the erasure.Eraser of the inputs of jobs not finished
// (async_inputs: imported files, bulk updates' items), run by the erasure
// task: every item that names the customer is redacted and marked
// (async_input_erasures), so that the job, whenever it runs, reports it
// failed rather than write the customer back. A JSON input is redacted
// item by item (the elements of its array, or of an object's arrays)
// with Subject.Redact; a CSV input field by field, each field that is or
// holds one of the values (or is the id) blanked with spaces, its quotes
// and line breaks kept, so that the file keeps its rows, lines and length
// (a job reading it part by part finds each part where it was). It reads
// the project's pending inputs whole (a scan, what the jobs not yet done
// hold) and writes only those that held the customer, so the only rows it
// keeps locked until the task commits are the inputs of jobs that name her.
func EraseInputs(ctx context.Context, tx pgx.Tx, projectID string, s erasure.Subject, _ *erasure.Counts) error {
	type change struct {
		action string
		lens   []int // the stored parts' lengths
		data   []byte
		items  []int64
	}
	var changes []change
	var cur change
	var in []byte
	flush := func() error {
		if cur.action == "" || !s.Mentions(in) {
			return nil
		}
		out, items, err := s.RedactInput(in)
		if err != nil {
			return fmt.Errorf("async: the input of %s: %w", cur.action, err)
		}
		if len(items) > 0 || !bytes.Equal(out, in) {
			cur.data, cur.items = out, items
			changes = append(changes, cur)
		}
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT action_id, data FROM async_inputs WHERE project_id = $1 ORDER BY action_id, part`, projectID)
	if err != nil {
		return err
	}
	var action string
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&action, &data}, func() error {
		if action != cur.action {
			if err := flush(); err != nil {
				return err
			}
			cur, in = change{action: action}, nil
		}
		cur.lens, in = append(cur.lens, len(data)), append(in, data...)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil || len(changes) == 0 {
		return err
	}
	b := &pgx.Batch{}
	for _, c := range changes {
		queueRewrite(b, projectID, c.action, c.lens, c.data)
		if len(c.items) > 0 {
			b.Queue(`INSERT INTO async_input_erasures (project_id, action_id, item) SELECT $1, $2, unnest($3::INT8[])
				ON CONFLICT DO NOTHING`, projectID, c.action, c.items)
		}
	}
	return tx.SendBatch(ctx, b).Close()
}

// queueRewrite queues the writing of an action's input as data: in the
// parts it had when its length is the same (a CSV file, which a job may be
// reading part by part), else in new parts (a JSON document, read whole).
func queueRewrite(b *pgx.Batch, projectID, action string, lens []int, data []byte) {
	total := 0
	for _, n := range lens {
		total += n
	}
	if total == len(data) {
		off := 0
		for part, n := range lens {
			b.Queue(`UPDATE async_inputs SET data = $4 WHERE project_id = $1 AND action_id = $2 AND part = $3`,
				projectID, action, part, data[off:off+n])
			off += n
		}
		return
	}
	b.Queue(`DELETE FROM async_inputs WHERE project_id = $1 AND action_id = $2`, projectID, action)
	for part := 0; part == 0 || part*inputPart < len(data); part++ {
		b.Queue(`INSERT INTO async_inputs (project_id, action_id, part, data) VALUES ($1, $2, $3, $4)`,
			projectID, action, part, data[part*inputPart:min(len(data), (part+1)*inputPart)])
	}
}

// Skips is what a chunk of a job's items must leave out because of a
// permanent deletion (erasure.Skips), read in the chunk's transaction
// (Job.Skips): it sees one or the other of an erasure's marks and its
// subject, whichever committed before the chunk's snapshot.
type Skips = erasure.Skips

// Skips reads the skips of the job's items [from, to) in q (the chunk's
// transaction).
func (j *Job) Skips(ctx context.Context, q db.Querier, from, to int) (Skips, error) {
	var marked map[int]bool
	var subjects []erasure.Subject
	b := &pgx.Batch{}
	b.Queue(erasingSQL, []string{j.ProjectID}).Query(func(rows pgx.Rows) error {
		by, err := scanErasing(rows)
		subjects = by[j.ProjectID]
		return err
	})
	b.Queue(`SELECT item FROM async_input_erasures WHERE project_id = $1 AND action_id = $2 AND item >= $3 AND item < $4`,
		j.ProjectID, j.ActionID, from, to).Query(func(rows pgx.Rows) error {
		items, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, i := range items {
			if marked == nil {
				marked = map[int]bool{}
			}
			marked[int(i)] = true
		}
		return err
	})
	err := q.SendBatch(ctx, b).Close()
	return erasure.NewSkips(marked, subjects), err
}
