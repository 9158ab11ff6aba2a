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

// ChangeEventSchemas is logged when a project's custom event schemas change
// (key: the project id), so every resolver drops its cached list.
const ChangeEventSchemas = "event_schemas"

// The types of a custom event's properties.
const (
	PropString   = "string"
	PropNumber   = "number"
	PropDate     = "date"     // YYYY-MM-DD
	PropDatetime = "datetime" // RFC 3339
	PropBoolean  = "boolean"
)

// EventPropertyTypes are the property types, in the reference's order.
var EventPropertyTypes = []string{PropString, PropNumber, PropDate, PropDatetime, PropBoolean}

// ValidEventPropertyType reports whether t is a property type.
func ValidEventPropertyType(t string) bool {
	for _, v := range EventPropertyTypes {
		if v == t {
			return true
		}
	}
	return false
}

// Limits of event schemas: an event name is what POST /v1/events sends as
// event (1 to 300 characters).
const (
	MaxEventNameLen      = 300
	MaxEventPropertyLen  = 100 // a property's name
	MaxEventPropertyKeys = 200 // properties of one schema, deleted ones included
)

// ErrEventSchemaNotFound and ErrEventSchemaExists are the store's answers
// for an unknown schema and a name the project already uses.
var (
	ErrEventSchemaNotFound = errors.New("tenancy: custom event schema not found")
	ErrEventSchemaExists   = errors.New("tenancy: the project already has a custom event schema of this name")
)

// EventProperty is one property of a custom event's metadata. A deleted
// property stays listed but is no longer checked.
type EventProperty struct {
	Type     string `json:"type"`
	Optional bool   `json:"optional"`
	Deleted  bool   `json:"deleted,omitempty"`
}

// EventSchema defines a custom event of a project: its name (the event
// sent to POST /v1/events) and the properties of its metadata. Schemas
// the Resolver returns are shared: read them, never change them.
type EventSchema struct {
	ID         string
	ProjectID  string
	Name       string
	Properties map[string]EventProperty
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

const eventSchemaColumns = `project_id, id, name, properties, created_at, updated_at`

func scanEventSchema(r pgx.Row) (EventSchema, error) {
	var s EventSchema
	var props []byte
	if err := r.Scan(&s.ProjectID, &s.ID, &s.Name, &props, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return EventSchema{}, err
	}
	if err := json.Unmarshal(props, &s.Properties); err != nil {
		return EventSchema{}, fmt.Errorf("tenancy: event schema %s properties: %w", s.ID, err)
	}
	if s.Properties == nil {
		s.Properties = map[string]EventProperty{}
	}
	return s, nil
}

func eventSchemaErr(err error) error {
	if errors.Is(err, db.ErrConflict) && db.Constraint(err) == "custom_event_schemas_name" {
		return ErrEventSchemaExists
	}
	return err
}

// CreateEventSchema stores a project's schema (its ID and creation time are
// assigned): ErrEventSchemaExists when the name is taken in the project.
func CreateEventSchema(ctx context.Context, q db.Querier, s *EventSchema) error {
	if s.Properties == nil {
		s.Properties = map[string]EventProperty{}
	}
	props, err := json.Marshal(s.Properties)
	if err != nil {
		return err
	}
	s.ID = ids.New("ms_")
	s.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	s.UpdatedAt = nil
	if _, err := q.Exec(ctx, `INSERT INTO custom_event_schemas (project_id, id, name, properties, created_at)
		VALUES ($1, $2, $3, $4, $5)`, s.ProjectID, s.ID, s.Name, props, s.CreatedAt); err != nil {
		return eventSchemaErr(err)
	}
	return RecordChange(ctx, q, ChangeEventSchemas, s.ProjectID)
}

// GetEventSchema returns one of a project's schemas.
func GetEventSchema(ctx context.Context, q db.Querier, projectID, id string) (EventSchema, error) {
	s, err := scanEventSchema(q.QueryRow(ctx, `SELECT `+eventSchemaColumns+` FROM custom_event_schemas
		WHERE project_id = $1 AND id = $2`, projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return EventSchema{}, ErrEventSchemaNotFound
	}
	return s, err
}

// ListEventSchemas returns a project's schemas, oldest first.
func ListEventSchemas(ctx context.Context, q db.Querier, projectID string) ([]EventSchema, error) {
	rows, err := q.Query(ctx, `SELECT `+eventSchemaColumns+` FROM custom_event_schemas WHERE project_id = $1 ORDER BY id`,
		projectID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EventSchema, error) { return scanEventSchema(r) })
}

// UpdateEventSchema writes a schema's properties (its name never changes).
func UpdateEventSchema(ctx context.Context, q db.Querier, s *EventSchema) error {
	props, err := json.Marshal(s.Properties)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	if err := writeOne(ctx, q, ErrEventSchemaNotFound, Change{Kind: ChangeEventSchemas, Key: s.ProjectID},
		`UPDATE custom_event_schemas SET properties = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`,
		s.ProjectID, s.ID, props, now); err != nil {
		return err
	}
	s.UpdatedAt = &now
	return nil
}

// DeleteEventSchema removes a project's schema for good.
func DeleteEventSchema(ctx context.Context, q db.Querier, projectID, id string) error {
	return writeOne(ctx, q, ErrEventSchemaNotFound, Change{Kind: ChangeEventSchemas, Key: projectID},
		`DELETE FROM custom_event_schemas WHERE project_id = $1 AND id = $2`, projectID, id)
}
