package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
)

// SchemaTable is a directory table of a project's schemas
// (custom_event_schemas, metadata_schemas): rows keyed by project and id,
// listed oldest first, whose properties are a JSON document, each write
// logged as a change of the project (change) so every resolver drops its
// cached list. The kinds differ only in their other columns.
type SchemaTable[S any] struct {
	table, columns string // columns: project_id, id, …, created_at, updated_at
	scan           func(pgx.Row) (S, error)
	notFound       error
	change         string
}

// Get returns one of a project's schemas (its notFound error when it has none of that id).
func (t SchemaTable[S]) Get(ctx context.Context, q db.Querier, projectID, id string) (S, error) {
	s, err := t.scan(q.QueryRow(ctx, `SELECT `+t.columns+` FROM `+t.table+` WHERE project_id = $1 AND id = $2`, projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		var none S
		return none, t.notFound
	}
	return s, err
}

// List returns a project's schemas, oldest first.
func (t SchemaTable[S]) List(ctx context.Context, q db.Querier, projectID string) ([]S, error) {
	rows, err := q.Query(ctx, `SELECT `+t.columns+` FROM `+t.table+` WHERE project_id = $1 ORDER BY id`, projectID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (S, error) { return t.scan(r) })
}

// Delete removes a project's schema for good.
func (t SchemaTable[S]) Delete(ctx context.Context, q db.Querier, projectID, id string) error {
	return writeOne(ctx, q, t.notFound, Change{Kind: t.change, Key: projectID},
		`DELETE FROM `+t.table+` WHERE project_id = $1 AND id = $2`, projectID, id)
}

// update runs set (an UPDATE of the row of projectID and id, $1 and $2,
// whose last argument is the time it is made at) and answers that time.
func (t SchemaTable[S]) update(ctx context.Context, q db.Querier, projectID, id, set string, args ...any) (time.Time, error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return now, writeOne(ctx, q, t.notFound, Change{Kind: t.change, Key: projectID},
		`UPDATE `+t.table+` SET `+set+` WHERE project_id = $1 AND id = $2`, append(append([]any{projectID, id}, args...), now)...)
}

// newSchema is what a new schema is stored with: its id, its creation
// time and its properties (an empty map for none) as JSON.
func newSchema[P any](props *map[string]P) (id string, created time.Time, raw []byte, err error) {
	if *props == nil {
		*props = map[string]P{}
	}
	raw, err = json.Marshal(*props)
	return ids.New("ms_"), time.Now().UTC().Truncate(time.Millisecond), raw, err
}

// scanProperties reads a schema's properties document into props (an
// empty map for none).
func scanProperties[P any](raw []byte, props *map[string]P, what, id string) error {
	if err := json.Unmarshal(raw, props); err != nil {
		return fmt.Errorf("tenancy: %s %s properties: %w", what, id, err)
	}
	if *props == nil {
		*props = map[string]P{}
	}
	return nil
}
