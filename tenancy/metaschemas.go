package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// ChangeMetadataSchemas is logged when a project's metadata schemas change
// (key: the project id), so every resolver drops its cached list and the
// regional instances check metadata against the new definitions.
const ChangeMetadataSchemas = "metadata_schemas"

// The types of a metadata definition, in the reference's order.
const (
	MetaString   = "string"
	MetaNumber   = "number"
	MetaObject   = "object"
	MetaDate     = "date"     // YYYY-MM-DD
	MetaDatetime = "datetime" // RFC 3339
	MetaGeopoint = "geopoint" // geo:<lat>,<lng>
	MetaBoolean  = "boolean"
	MetaImageURL = "image_url"
)

// MetaTypes are the definition types.
var MetaTypes = []string{MetaString, MetaNumber, MetaObject, MetaDate, MetaDatetime, MetaGeopoint, MetaBoolean, MetaImageURL}

// MetaResources are the standard resources whose metadata a schema
// describes; any other related_object is a custom nested object, which a
// definition of type object names as its object_type.
var MetaResources = []string{"campaign", "customer", "earning_rule", "loyalty_tier", "order", "order_item", "product",
	"promotion_tier", "publication", "redemption", "reward", "voucher"}

// MaxMetaDefinitions is the most definitions of one schema, deleted ones
// included (the reference's limit per resource).
const MaxMetaDefinitions = 100

// ErrMetadataSchemaNotFound and ErrMetadataSchemaExists are the store's
// answers for an unknown schema and a resource that already has one.
var (
	ErrMetadataSchemaNotFound = errors.New("tenancy: metadata schema not found")
	ErrMetadataSchemaExists   = errors.New("tenancy: the project already has a metadata schema for this resource")
)

// MetaDefinition is one key of a resource's metadata. Stored (and shown by
// the management API) with the reference's snake_case names; the read API
// renders it in camelCase. A deleted definition stays listed but is no
// longer checked.
type MetaDefinition struct {
	Type        string   `json:"type"`
	Optional    bool     `json:"optional"`
	Array       bool     `json:"array"`
	Deleted     bool     `json:"deleted"`
	ObjectType  *string  `json:"object_type"`
	Eq          []any    `json:"eq,omitempty"`
	Ne          []any    `json:"ne,omitempty"`
	Lt          *float64 `json:"lt,omitempty"`
	Lte         *float64 `json:"lte,omitempty"`
	Gt          *float64 `json:"gt,omitempty"`
	Gte         *float64 `json:"gte,omitempty"`
	MinLength   *int     `json:"min_length,omitempty"`
	MaxLength   *int     `json:"max_length,omitempty"`
	ExactLength *int     `json:"exact_length,omitempty"`
}

// MetadataSchema holds the definitions of one resource's metadata in a
// project. Schemas the Resolver returns are shared: read them, never
// change them.
type MetadataSchema struct {
	ID            string
	ProjectID     string
	RelatedObject string
	Properties    map[string]MetaDefinition
	// AllowDefinedOnly refuses keys no live definition names; otherwise
	// they are kept as sent.
	AllowDefinedOnly bool
	CreatedAt        time.Time
	UpdatedAt        *time.Time
}

const metadataSchemaColumns = `project_id, id, related_object, properties, allow_defined_only, created_at, updated_at`

// MetadataSchemas is the table of the projects' metadata schemas.
var MetadataSchemas = SchemaTable[MetadataSchema]{table: "metadata_schemas", columns: metadataSchemaColumns, scan: scanMetadataSchema,
	notFound: ErrMetadataSchemaNotFound, change: ChangeMetadataSchemas}

func scanMetadataSchema(r pgx.Row) (MetadataSchema, error) {
	var s MetadataSchema
	var props []byte
	if err := r.Scan(&s.ProjectID, &s.ID, &s.RelatedObject, &props, &s.AllowDefinedOnly, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return MetadataSchema{}, err
	}
	return s, scanProperties(props, &s.Properties, "metadata schema", s.ID)
}

// CreateMetadataSchema stores a project's schema (its ID and creation time
// are assigned): ErrMetadataSchemaExists when the resource has one.
func CreateMetadataSchema(ctx context.Context, q db.Querier, s *MetadataSchema) error {
	var props []byte
	var err error
	if s.ID, s.CreatedAt, props, err = newSchema(&s.Properties); err != nil {
		return err
	}
	s.UpdatedAt = nil
	if _, err := q.Exec(ctx, `INSERT INTO metadata_schemas (project_id, id, related_object, properties, allow_defined_only,
		created_at) VALUES ($1, $2, $3, $4, $5, $6)`, s.ProjectID, s.ID, s.RelatedObject, props, s.AllowDefinedOnly,
		s.CreatedAt); err != nil {
		if errors.Is(err, db.ErrConflict) && db.Constraint(err) == "metadata_schemas_related_object" {
			return ErrMetadataSchemaExists
		}
		return err
	}
	return RecordChange(ctx, q, ChangeMetadataSchemas, s.ProjectID)
}

// UpdateMetadataSchema writes a schema's definitions and allow_defined_only
// (its resource never changes).
func UpdateMetadataSchema(ctx context.Context, q db.Querier, s *MetadataSchema) error {
	props, err := json.Marshal(s.Properties)
	if err != nil {
		return err
	}
	now, err := MetadataSchemas.update(ctx, q, s.ProjectID, s.ID, `properties = $3, allow_defined_only = $4, updated_at = $5`,
		props, s.AllowDefinedOnly)
	if err != nil {
		return err
	}
	s.UpdatedAt = &now
	return nil
}
