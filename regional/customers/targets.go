package customers

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/targeting"
)

// What segments need of the customers table, which this package owns: the
// paths a segment's filter may name (their columns and their values in a
// Customer), the matching customers of a range of ids as a subquery, and
// the customers of a change.

func str(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func addr(f func(*Address) *string) func(Customer) any {
	return func(c Customer) any {
		if c.Attrs.Address == nil {
			return nil
		}
		return str(f(c.Attrs.Address))
	}
}

// Targets are the paths of a customer that a filter names.
var Targets = targeting.Schema[Customer]{
	Fields: map[string]targeting.Field[Customer]{
		"id":          {Kind: targeting.String, SQL: "id", Get: func(c Customer) any { return c.ID }},
		"source_id":   {Kind: targeting.String, SQL: "source_id", Get: func(c Customer) any { return str(c.SourceID) }},
		"name":        {Kind: targeting.String, SQL: "name", Get: func(c Customer) any { return str(c.Attrs.Name) }},
		"email":       {Kind: targeting.String, SQL: "email", Get: func(c Customer) any { return str(c.Attrs.Email) }},
		"phone":       {Kind: targeting.String, SQL: "attrs->>'phone'", Get: func(c Customer) any { return str(c.Attrs.Phone) }},
		"description": {Kind: targeting.String, SQL: "attrs->>'description'", Get: func(c Customer) any { return str(c.Attrs.Description) }},
		"birthdate":   {Kind: targeting.Date, SQL: "attrs->>'birthdate'", Get: func(c Customer) any { return str(c.Attrs.Birthdate) }},
		"birthday":    {Kind: targeting.Date, SQL: "attrs->>'birthday'", Get: func(c Customer) any { return str(c.Attrs.Birthday) }},
		"address.city": {Kind: targeting.String, SQL: "attrs->'address'->>'city'",
			Get: addr(func(a *Address) *string { return a.City })},
		"address.state": {Kind: targeting.String, SQL: "attrs->'address'->>'state'",
			Get: addr(func(a *Address) *string { return a.State })},
		"address.country": {Kind: targeting.String, SQL: "attrs->'address'->>'country'",
			Get: addr(func(a *Address) *string { return a.Country })},
		"address.postal_code": {Kind: targeting.String, SQL: "attrs->'address'->>'postal_code'",
			Get: addr(func(a *Address) *string { return a.PostalCode })},
		"address.line_1": {Kind: targeting.String, SQL: "attrs->'address'->>'line_1'",
			Get: addr(func(a *Address) *string { return a.Line1 })},
		"address.line_2": {Kind: targeting.String, SQL: "attrs->'address'->>'line_2'",
			Get: addr(func(a *Address) *string { return a.Line2 })},
		"created_at": {Kind: targeting.DateTime, SQL: "created_at", Get: func(c Customer) any {
			if c.CreatedAt.IsZero() {
				return nil // a customer not yet created (a request's, say)
			}
			return c.CreatedAt
		}},
		"updated_at": {Kind: targeting.DateTime, SQL: "updated_at", Get: func(c Customer) any {
			if c.UpdatedAt == nil {
				return nil
			}
			return *c.UpdatedAt
		}},
	},
	MetadataSQL: "attrs->'metadata'",
	Metadata:    func(c Customer) map[string]any { return c.Attrs.Metadata },
	// The counts' SQL is the events package's (segments.EventCounts),
	// which owns them.
	Events: func(c Customer, name string) int { return c.EventCounts[name] },
}

// Matching is a subquery of the ids of the customers of project $1 with
// ids in ($2, $3] that satisfy where (a condition over Targets' columns,
// its own arguments from $4 on): what a segment's recomputation inserts a
// chunk at a time.
func Matching(where string) string {
	return `SELECT id FROM customers WHERE project_id = $1 AND id > $2 AND id <= $3 AND ` + where
}

// ChunkIDs are the ids of the next at most size customers after the id
// after, in order.
func ChunkIDs(ctx context.Context, q db.Querier, projectID, after string, size int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM customers WHERE project_id = $1 AND id > $2 ORDER BY id LIMIT $3`, projectID, after, size)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ChunkEnd is the id that ends the next chunk of at most size customers
// after the id after, and how many it holds (0: none left).
func ChunkEnd(ctx context.Context, q db.Querier, projectID, after string, size int) (end string, n int, err error) {
	err = q.QueryRow(ctx, `SELECT COALESCE(max(id), ''), count(*) FROM
		(SELECT id FROM customers WHERE project_id = $1 AND id > $2 ORDER BY id LIMIT $3) AS c`,
		projectID, after, size).Scan(&end, &n)
	return end, n, err
}

// Count is how many customers the project has.
func Count(ctx context.Context, q db.Querier, projectID string) (n int, err error) {
	err = q.QueryRow(ctx, `SELECT count(*) FROM customers WHERE project_id = $1`, projectID).Scan(&n)
	return n, err
}

// Many reads the customers of ids that exist.
func Many(ctx context.Context, q db.Querier, projectID string, ids []string) ([]Customer, error) {
	return db.Collect(scan)(q.Query(ctx, `SELECT `+columns+` FROM customers WHERE project_id = $1 AND id = ANY($2)`, projectID, ids))
}

// Resolve maps each of names (ids or source_ids) to its customer's id; a
// name no customer has is missing from the map.
func Resolve(ctx context.Context, q db.Querier, projectID string, names []string) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT id, source_id FROM customers WHERE project_id = $1 AND (id = ANY($2) OR source_id = ANY($2))`,
		projectID, names)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var id string
	var src *string
	_, err = pgx.ForEachRow(rows, []any{&id, &src}, func() error {
		out[id] = id
		if src != nil {
			out[*src] = id
		}
		return nil
	})
	return out, err
}

// Watcher is told of the customers a write created, updated or deleted, in
// its transaction (queued on b), so that what depends on customers' data
// (segments) follows it in the asynchronous phase.
type Watcher interface {
	Changed(ctx context.Context, b *pgx.Batch, projectID string, ids []string) error
}

// MemberFilter makes the condition on the customers' id column that keeps
// a segment's members (the segment's own subquery; arg gives the
// placeholder of each of its values), or a 404 for an unknown segment.
type MemberFilter interface {
	Members(ctx context.Context, projectID, segmentID string, arg func(any) string) (string, error)
}
