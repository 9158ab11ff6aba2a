package customers

import (
	"errors"

	"github.com/jackc/pgx/v5"
)

// Found is a customer read in a caller's batch (QueueGet).
type Found struct {
	byID, bySource Customer
	idOK, sourceOK bool
}

// QueueGet queues into b the read of the customer of project projectID
// whose id, else source_id, is idOrSource (as Get finds one), into out.
func QueueGet(b *pgx.Batch, projectID, idOrSource string, out *Found) {
	for _, col := range []string{"id", "source_id"} {
		c, ok := &out.byID, &out.idOK
		if col == "source_id" {
			c, ok = &out.bySource, &out.sourceOK
		}
		b.Queue(`SELECT `+columns+` FROM customers WHERE project_id = $1 AND `+col+` = $2`, projectID, idOrSource).QueryRow(func(row pgx.Row) error {
			var err error
			*c, err = scan(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			*ok = err == nil
			return err
		})
	}
}

// Customer is the customer found: by id, else by source_id.
func (f *Found) Customer() (Customer, bool) {
	if f.idOK {
		return f.byID, true
	}
	return f.bySource, f.sourceOK
}

// IDOf is a scalar subquery of the id of the customer of project $1 whose
// id, else source_id, is key (a parameter such as "$2"): NULL for none. A
// read queued in the batch of QueueGet names the customer with it before
// the customer is read.
func IDOf(key string) string {
	return `COALESCE((SELECT id FROM customers WHERE project_id = $1 AND id = ` + key + `),
		(SELECT id FROM customers WHERE project_id = $1 AND source_id = ` + key + `))`
}
