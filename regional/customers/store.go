package customers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
)

const columns = `id, source_id, attrs, created_at, updated_at`

func scan(r pgx.Row) (Customer, error) {
	var c Customer
	var attrs []byte
	if err := r.Scan(&c.ID, &c.SourceID, &attrs, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return Customer{}, err
	}
	if err := json.Unmarshal(attrs, &c.Attrs); err != nil {
		return Customer{}, fmt.Errorf("customers: attrs of %s: %w", c.ID, err)
	}
	return c, nil
}

// get finds a customer by id or, failing that, by source_id; lock takes a
// row lock for an update in the same transaction.
func get(ctx context.Context, q db.Querier, projectID, idOrSource string, lock bool) (Customer, error) {
	suffix := db.ForUpdate(lock)
	c, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM customers WHERE project_id = $1 AND id = $2`+suffix, projectID, idOrSource))
	if errors.Is(err, db.ErrNotFound) {
		c, err = scan(q.QueryRow(ctx, `SELECT `+columns+` FROM customers WHERE project_id = $1 AND source_id = $2`+suffix,
			projectID, idOrSource))
	}
	return c, err
}

func getBySourceID(ctx context.Context, q db.Querier, projectID, sourceID string, lock bool) (Customer, error) {
	return scan(q.QueryRow(ctx, `SELECT `+columns+` FROM customers WHERE project_id = $1 AND source_id = $2`+db.ForUpdate(lock),
		projectID, sourceID))
}

func insert(ctx context.Context, q db.Querier, projectID string, c Customer) error {
	attrs, err := json.Marshal(c.Attrs)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO customers (project_id, id, source_id, name, email, attrs, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, projectID, c.ID, c.SourceID, c.Attrs.Name, c.Attrs.Email, attrs, c.CreatedAt)
	return err
}

func update(ctx context.Context, q db.Querier, projectID string, c Customer) error {
	attrs, err := json.Marshal(c.Attrs)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `UPDATE customers SET source_id = $3, name = $4, email = $5, attrs = $6, updated_at = $7
		WHERE project_id = $1 AND id = $2`, projectID, c.ID, c.SourceID, c.Attrs.Name, c.Attrs.Email, attrs, c.UpdatedAt)
	return err
}

func remove(ctx context.Context, q db.Querier, projectID, id string) error {
	_, err := q.Exec(ctx, `DELETE FROM customers WHERE project_id = $1 AND id = $2`, projectID, id)
	return err
}

// ListQuery selects and orders a page of customers.
type ListQuery struct {
	listq.Query    // order: created_at, updated_at or source_id, either way
	CreatedAfter   *time.Time
	CreatedBefore  *time.Time
	UpdatedAfter   *time.Time
	UpdatedBefore  *time.Time
	CreatedAtAfter *time.Time // the reference's `starting_after` timestamp cursor
	Email          string
	Name           string
	City           string
	Metadata       MetadataFilter
	// InSegment, when set, is the condition on the id column that keeps a
	// segment's members, made with the list's arg (MemberFilter).
	InSegment func(arg func(any) string) (string, error)
}

// sortKeys maps an order to its keyset expression. IDs are time-ordered, so
// creation order is ID order and uses the primary key.
var sortKeys = map[string]string{
	"created_at": "id",
	"updated_at": "COALESCE(updated_at, created_at)",
	"source_id":  "COALESCE(source_id, '')",
}

func list(ctx context.Context, q db.Querier, projectID string, lq ListQuery) ([]Customer, int, error) {
	ls, err := listSQL(projectID, lq)
	if err != nil {
		return nil, 0, err
	}
	out, err := db.Collect(scan)(q.Query(ctx, ls.page, ls.pageArgs...))
	if err != nil {
		return nil, 0, err
	}
	var total int
	err = q.QueryRow(ctx, ls.count, ls.countArgs...).Scan(&total)
	return out, total, err
}

// listStatements are a list's two reads: its page and its total.
type listStatements struct {
	page, count         string
	pageArgs, countArgs []any
}

func listSQL(projectID string, lq ListQuery) (listStatements, error) {
	where := []string{"project_id = $1"}
	args := []any{projectID}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if lq.Email != "" {
		where = append(where, "email = "+arg(lq.Email))
	}
	if lq.Name != "" {
		where = append(where, "name = "+arg(lq.Name))
	}
	if lq.City != "" {
		where = append(where, "attrs->'address'->>'city' = "+arg(lq.City))
	}
	if cond := lq.Metadata.sql(); cond != "" {
		where = append(where, cond)
	}
	if lq.InSegment != nil {
		cond, err := lq.InSegment(arg)
		if err != nil {
			return listStatements{}, err
		}
		where = append(where, cond)
	}
	for _, f := range []struct {
		t  *time.Time
		op string
	}{{lq.CreatedAfter, "created_at >"}, {lq.CreatedBefore, "created_at <"},
		{lq.UpdatedAfter, "updated_at >"}, {lq.UpdatedBefore, "updated_at <"}} {
		if f.t != nil {
			where = append(where, f.op+" "+arg(*f.t))
		}
	}
	ls := listStatements{count: `SELECT count(*) FROM customers WHERE ` + strings.Join(where, " AND "),
		countArgs: append([]any(nil), args...)}

	key := sortKeys[lq.Key]
	if lq.CreatedAtAfter != nil {
		cmp, _ := listq.Keyset(lq.Desc)
		where = append(where, "created_at "+cmp+" "+arg(*lq.CreatedAtAfter))
	}
	cond, orderBy, args := lq.Keyset("customers", key, args)
	from := `customers WHERE ` + strings.Join(where, " AND ") + cond
	if !lq.Metadata.Empty() {
		// The matches first, then their order: read in the key's order,
		// the planner, guessing a pair common, would filter the project's
		// customers from the newest until it had a page, which for a rare
		// pair (or none) is every one of them. The total reads the
		// matches anyway. (OFFSET 0 keeps PostgreSQL from merging the two.)
		from = `(SELECT ` + columns + ` FROM ` + from + ` OFFSET 0) AS customers`
	}
	ls.page = `SELECT ` + columns + ` FROM ` + from + ` ORDER BY ` + orderBy + fmt.Sprintf(` LIMIT $%d`, len(args)+1) + lq.OffsetSQL()
	ls.pageArgs = append(args, lq.Limit+1)
	return ls, nil
}

// QueueGetByIDOf queues onto b the read of the customer whose id the SQL
// expression idExpr yields (a subquery of the caller's table, with args as
// $2…; $1 is projectID), so that a caller reads its row's customer in the
// same round trip; into runs if there is one.
func QueueGetByIDOf(b *pgx.Batch, projectID, idExpr string, args []any, into func(Customer)) {
	db.QueueEach(b, scan, into, `SELECT `+columns+` FROM customers WHERE project_id = $1 AND id = `+idExpr,
		append([]any{projectID}, args...)...)
}
