package async

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/erasure"
)

// ErasedItem is the reason a job gives for an item it did not apply
// because it names a customer permanently deleted (Skips).
const ErasedItem = "The item names a customer who was permanently deleted: it was not applied."

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
		out, items, err := redactInput(s, in)
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

// redactInput is in without s's data, and the items that named s.
func redactInput(s erasure.Subject, in []byte) ([]byte, []int64, error) {
	t := bytes.TrimSpace(in)
	if len(t) > 0 && (t[0] == '[' || t[0] == '{') && json.Valid(t) {
		return redactJSON(s, t)
	}
	out, items := redactCSV(s, in)
	return out, items, nil
}

// redactJSON redacts the elements of doc's array (or of each array of an
// object) one by one, so that the items that named s are known; any other
// value is redacted whole.
func redactJSON(s erasure.Subject, doc []byte) ([]byte, []int64, error) {
	var items []int64
	elems := func(raw json.RawMessage) (json.RawMessage, error) {
		var es []json.RawMessage
		if err := json.Unmarshal(raw, &es); err != nil {
			return nil, err
		}
		for i, e := range es {
			out, did, err := s.Redact(e)
			if err != nil {
				return nil, err
			}
			if did {
				es[i], items = out, append(items, int64(i))
			}
		}
		return json.Marshal(es)
	}
	if doc[0] == '[' {
		out, err := elems(doc)
		return out, items, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(doc, &obj); err != nil {
		return nil, nil, err
	}
	for k, v := range obj {
		var err error
		if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '[' {
			obj[k], err = elems(t)
		} else {
			obj[k], _, err = s.Redact(v)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	out, err := json.Marshal(obj)
	return out, items, err
}

// redactCSV blanks, in a copy of in, each field of a data row that names
// s (Skips.Fields), and answers the rows that held one (0 for the first
// after the header). Rows are told apart as the jobs read them
// (encoding/csv, any width), the header is left.
func redactCSV(s erasure.Subject, in []byte) ([]byte, []int64) {
	out := bytes.Clone(in)
	r := csv.NewReader(bytes.NewReader(in))
	r.FieldsPerRecord = -1
	var items []int64
	for row := int64(-1); ; row++ {
		start := r.InputOffset()
		_, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, items
		}
		var pe *csv.ParseError
		if err != nil && !errors.As(err, &pe) {
			return out, items
		}
		if row < 0 {
			continue // the header
		}
		named := false
		for _, sp := range fieldSpans(in[start:r.InputOffset()]) {
			f := in[start+int64(sp[0]) : start+int64(sp[1])]
			if names(s, unquote(f)) {
				blank(out[start+int64(sp[0]) : start+int64(sp[1])])
				named = true
			}
		}
		if named {
			items = append(items, row)
		}
	}
}

// names says whether a field's value is or holds one of s's values, or is
// s's id.
func names(s erasure.Subject, v string) bool {
	if strings.TrimSpace(v) == s.CustomerID {
		return true
	}
	_, did := s.RedactText(v)
	return did
}

// fieldSpans are the byte ranges of a raw CSV row's fields, quotes
// included, its line break not.
func fieldSpans(row []byte) [][2]int {
	var spans [][2]int
	start, inQuotes := 0, false
	for i := 0; i < len(row); i++ {
		c := row[i]
		switch {
		case inQuotes:
			if c == '"' {
				if i+1 < len(row) && row[i+1] == '"' {
					i++
				} else {
					inQuotes = false
				}
			}
		case c == '"' && i == start:
			inQuotes = true
		case c == ',':
			spans, start = append(spans, [2]int{start, i}), i+1
		case c == '\n' || c == '\r':
			return append(spans, [2]int{start, i})
		}
	}
	return append(spans, [2]int{start, len(row)})
}

// unquote is a raw field's value.
func unquote(f []byte) string {
	if len(f) >= 2 && f[0] == '"' && f[len(f)-1] == '"' {
		return strings.ReplaceAll(string(f[1:len(f)-1]), `""`, `"`)
	}
	return string(f)
}

// blank overwrites a raw field with spaces, keeping the quotes around a
// quoted one and the line breaks in it (and a stray quote, which keeps a
// row that did not read as CSV so): the row keeps its length and lines,
// and the field reads as empty (the jobs trim their cells).
func blank(f []byte) {
	quoted := len(f) >= 2 && f[0] == '"' && f[len(f)-1] == '"'
	for i, c := range f {
		switch {
		case c == '\n' || c == '\r':
		case quoted && (i == 0 || i == len(f)-1):
		case !quoted && c == '"':
		default:
			f[i] = ' '
		}
	}
}

// Skips is what a chunk of a job's items must leave out because of a
// permanent deletion: the items the erasure redacted in its input
// (EraseInputs), and the subjects of the project's erasures not finished,
// whose values an item the job read before the erasure may still hold.
// Read in the chunk's transaction, it sees one or the other: an erasure
// that committed before the chunk's snapshot has marked the items, one
// that did not is still unfinished there.
type Skips struct {
	marked   map[int]bool
	subjects []erasure.Subject
}

// Skips reads the skips of the job's items [from, to) in q (the chunk's
// transaction).
func (j *Job) Skips(ctx context.Context, q db.Querier, from, to int) (Skips, error) {
	var s Skips
	b := &pgx.Batch{}
	b.Queue(erasingSQL, []string{j.ProjectID}).Query(func(rows pgx.Rows) error {
		by, err := scanErasing(rows)
		s.subjects = by[j.ProjectID]
		return err
	})
	b.Queue(`SELECT item FROM async_input_erasures WHERE project_id = $1 AND action_id = $2 AND item >= $3 AND item < $4`,
		j.ProjectID, j.ActionID, from, to).Query(func(rows pgx.Rows) error {
		items, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, i := range items {
			if s.marked == nil {
				s.marked = map[int]bool{}
			}
			s.marked[int(i)] = true
		}
		return err
	})
	return s, q.SendBatch(ctx, b).Close()
}

// Marked says whether the erasure redacted item i.
func (s Skips) Marked(i int) bool { return s.marked[i] }

// Doc says whether item i, a JSON document, must be left out: it was
// redacted, or it names a customer being erased (Subject.Redact would
// change it).
func (s Skips) Doc(i int, doc []byte) bool {
	if s.marked[i] {
		return true
	}
	for _, subj := range s.subjects {
		if _, did, err := subj.Redact(doc); did || err != nil {
			return true
		}
	}
	return false
}

// Fields is Doc for item i, a CSV row: one of its fields is or holds a
// value of a customer being erased, or is their id.
func (s Skips) Fields(i int, fields []string) bool {
	if s.marked[i] {
		return true
	}
	for _, subj := range s.subjects {
		for _, f := range fields {
			if names(subj, f) {
				return true
			}
		}
	}
	return false
}
