package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
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

// EventSchemas is the table of the projects' custom event schemas.
var EventSchemas = SchemaTable[EventSchema]{table: "custom_event_schemas", columns: eventSchemaColumns, scan: scanEventSchema,
	notFound: ErrEventSchemaNotFound, change: ChangeEventSchemas}

func scanEventSchema(r pgx.Row) (EventSchema, error) {
	var s EventSchema
	var props []byte
	if err := r.Scan(&s.ProjectID, &s.ID, &s.Name, &props, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return EventSchema{}, err
	}
	return s, scanProperties(props, &s.Properties, "event schema", s.ID)
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
	var props []byte
	var err error
	if s.ID, s.CreatedAt, props, err = newSchema(&s.Properties); err != nil {
		return err
	}
	s.UpdatedAt = nil
	if _, err := q.Exec(ctx, `INSERT INTO custom_event_schemas (project_id, id, name, properties, created_at)
		VALUES ($1, $2, $3, $4, $5)`, s.ProjectID, s.ID, s.Name, props, s.CreatedAt); err != nil {
		return eventSchemaErr(err)
	}
	return RecordChange(ctx, q, ChangeEventSchemas, s.ProjectID)
}

// UpdateEventSchema writes a schema's properties (its name never changes).
func UpdateEventSchema(ctx context.Context, q db.Querier, s *EventSchema) error {
	props, err := json.Marshal(s.Properties)
	if err != nil {
		return err
	}
	now, err := EventSchemas.update(ctx, q, s.ProjectID, s.ID, `properties = $3, updated_at = $4`, props)
	if err != nil {
		return err
	}
	s.UpdatedAt = &now
	return nil
}
