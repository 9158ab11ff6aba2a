package erasure

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Rows redacts the documents sel reads in tx (each row its key and a JSON
// document; sel's arguments args), writing each one that held s's data
// back with upd ($1 the project, $2 the key, $3 the redacted document).
// The owner of the table writes both statements; it answers how many rows
// changed.
func Rows(ctx context.Context, tx pgx.Tx, projectID string, s Subject, sel string, args []any, upd string) (int, error) {
	return RowsBy(ctx, tx, projectID, func(_ string, doc []byte) ([]byte, bool, error) { return s.Redact(doc) }, sel, args, upd)
}

// RowsBy is Rows with the redaction of a row's document given (by its
// key): a job's result or checkpoint is redacted with Subject.RedactJob.
func RowsBy(ctx context.Context, tx pgx.Tx, projectID string, redact func(key string, doc []byte) ([]byte, bool, error),
	sel string, args []any, upd string) (int, error) {
	type row struct {
		key string
		doc []byte
	}
	rows, err := tx.Query(ctx, sel, args...)
	if err != nil {
		return 0, err
	}
	var changed []row
	var r row
	_, err = pgx.ForEachRow(rows, []any{&r.key, &r.doc}, func() error {
		out, did, err := redact(r.key, r.doc)
		if err != nil {
			return fmt.Errorf("erasure: %s: %w", r.key, err)
		}
		if did {
			changed = append(changed, row{r.key, out})
		}
		return nil
	})
	if err != nil || len(changed) == 0 {
		return 0, err
	}
	b := &pgx.Batch{}
	for _, c := range changed {
		b.Queue(upd, projectID, c.key, c.doc)
	}
	return len(changed), tx.SendBatch(ctx, b).Close()
}

// Mention is the SQL condition that text (a column or expression, a
// document as text) holds one of s's Patterns, its values appended to
// args: a prefilter that spares decoding the documents that cannot be
// the subject's. strpos is in both dialects.
func (s Subject) Mention(text string, args []any) (string, []any) {
	var or []string
	for _, p := range s.Patterns() {
		args = append(args, p)
		or = append(or, fmt.Sprintf("strpos(%s, $%d) > 0", text, len(args)))
	}
	return "(" + strings.Join(or, " OR ") + ")", args
}
