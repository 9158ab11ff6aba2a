package management

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/tenancy"
)

// Metadata schemas: the reference's ManagementProjectsMetadataSchema, one
// per resource of a project, stored in the directory beside the custom
// event schemas and read by regional instances through
// tenancy.Resolver.MetadataSchemas to check every write of metadata.

const metaSchemaResource = "metadata_schema"

type metaSchemaView struct {
	ID               string                            `json:"id"`
	RelatedObject    string                            `json:"related_object"`
	Properties       map[string]tenancy.MetaDefinition `json:"properties"`
	AllowDefinedOnly bool                              `json:"allow_defined_only"`
	CreatedAt        jsonx.Time                        `json:"created_at"`
	UpdatedAt        *jsonx.Time                       `json:"updated_at"`
	Object           string                            `json:"object"`
}

func viewMetaSchema(s tenancy.MetadataSchema) metaSchemaView {
	props := s.Properties
	if props == nil {
		props = map[string]tenancy.MetaDefinition{}
	}
	return metaSchemaView{ID: s.ID, RelatedObject: s.RelatedObject, Properties: props, AllowDefinedOnly: s.AllowDefinedOnly,
		CreatedAt: jsonx.Time{Time: s.CreatedAt}, UpdatedAt: jsonx.Ptr(s.UpdatedAt), Object: "metadata_schema"}
}

type metaSchemaInput struct {
	RelatedObject    *string         `json:"related_object"`
	AllowDefinedOnly *bool           `json:"allow_defined_only"`
	Properties       json.RawMessage `json:"properties"`
}

// definitionInput is one sent definition; pointers tell what was sent.
type definitionInput struct {
	Type        *string  `json:"type"`
	Optional    *bool    `json:"optional"`
	Array       *bool    `json:"array"`
	Deleted     *bool    `json:"deleted"`
	ObjectType  *string  `json:"object_type"`
	Eq          []any    `json:"eq"`
	Ne          []any    `json:"ne"`
	Lt          *float64 `json:"lt"`
	Lte         *float64 `json:"lte"`
	Gt          *float64 `json:"gt"`
	Gte         *float64 `json:"gte"`
	MinLength   *int     `json:"min_length"`
	MaxLength   *int     `json:"max_length"`
	ExactLength *int     `json:"exact_length"`
}

// customObjectName is what a custom nested object's schema may be called.
var customObjectName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,99}$`)

func standardResource(name string) bool { return slices.Contains(tenancy.MetaResources, name) }

func checkRelatedObject(name string) error {
	if standardResource(name) || customObjectName.MatchString(name) {
		return nil
	}
	return apierr.InvalidPayload(fmt.Sprintf("Property related_object must be one of %s, or the name of a custom nested "+
		"object (lower-case letters, digits and _, starting with a letter, at most 100), got %q.",
		strings.Join(tenancy.MetaResources, ", "), name))
}

// definitions reads the body's properties one by one, so an error names
// the property; nil when not sent (required says whether that is an error).
func (in metaSchemaInput) definitions(required bool) (map[string]json.RawMessage, error) {
	const how = " Send properties as an object of definitions, each {\"type\": \"string\"|\"number\"|\"boolean\"|\"date\"|" +
		"\"datetime\"|\"object\"|\"geopoint\"|\"image_url\", \"optional\", \"array\", …}; it may be {}."
	if isNull(in.Properties) {
		if required {
			return nil, apierr.InvalidPayload("Property properties is required." + how)
		}
		return nil, nil
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(in.Properties, &props); err != nil || props == nil {
		return nil, apierr.InvalidPayload("Property properties must be an object." + how)
	}
	return props, nil
}

// mergeDefinitions applies sent definitions to current: a sent definition
// replaces the stored one whole, except that its type never changes, and
// {"deleted": true} alone marks a stored one deleted; unsent ones stay.
func mergeDefinitions(resource string, current map[string]tenancy.MetaDefinition, sent map[string]json.RawMessage) (map[string]tenancy.MetaDefinition, error) {
	out, names := mergeStart(current, sent)
	for _, name := range names {
		field := fmt.Sprintf("properties[%q]", name)
		if why := badPropertyName(name); why != "" {
			return nil, apierr.InvalidPayload(fmt.Sprintf("Property properties holds a definition whose name %s: %q.", why, name))
		}
		var in definitionInput
		if err := json.Unmarshal(sent[name], &in); err != nil {
			return nil, apierr.InvalidPayload(fmt.Sprintf("Property %s must be an object {\"type\", \"optional\", \"array\", "+
				"\"eq\", \"ne\", \"lt\", \"lte\", \"gt\", \"gte\", \"min_length\", \"max_length\", \"exact_length\", "+
				"\"object_type\", \"deleted\"} of the right types, got %s.", field, abbreviate(sent[name])))
		}
		old, exists := current[name]
		if in.Type == nil && exists && in.Deleted != nil && *in.Deleted {
			old.Deleted = true
			out[name] = old
			continue
		}
		d, err := definitionOf(resource, field, in)
		if err != nil {
			return nil, err
		}
		if exists && old.Type != d.Type {
			return nil, apierr.InvalidPayload(fmt.Sprintf("Property %s.type cannot change from %q to %q: stored values "+
				"are of the old type. Define a new key instead.", field, old.Type, d.Type))
		}
		out[name] = d
	}
	if len(out) > tenancy.MaxMetaDefinitions {
		return nil, apierr.InvalidPayload(fmt.Sprintf("A metadata schema has at most %d definitions, deleted ones included; "+
			"this one would have %d.", tenancy.MaxMetaDefinitions, len(out)))
	}
	return out, nil
}

// definitionOf checks a sent definition whole: its type, and only the
// constraints that type takes.
func definitionOf(resource, field string, in definitionInput) (tenancy.MetaDefinition, error) {
	bad := func(format string, a ...any) (tenancy.MetaDefinition, error) {
		return tenancy.MetaDefinition{}, apierr.InvalidPayload(fmt.Sprintf("Property "+field+format, a...))
	}
	if in.Type == nil || !slices.Contains(tenancy.MetaTypes, *in.Type) {
		return bad(".type is required, one of %s.", strings.Join(tenancy.MetaTypes, ", "))
	}
	t := *in.Type
	d := tenancy.MetaDefinition{Type: t, Optional: in.Optional == nil || *in.Optional, Array: in.Array != nil && *in.Array,
		Deleted: in.Deleted != nil && *in.Deleted, Eq: in.Eq, Ne: in.Ne, Lt: in.Lt, Lte: in.Lte, Gt: in.Gt, Gte: in.Gte,
		MinLength: in.MinLength, MaxLength: in.MaxLength, ExactLength: in.ExactLength}
	if t != tenancy.MetaNumber && (in.Lt != nil || in.Lte != nil || in.Gt != nil || in.Gte != nil) {
		return bad(": lt, lte, gt and gte are for the number type only, this one is %s.", t)
	}
	if t != tenancy.MetaString && (in.MinLength != nil || in.MaxLength != nil || in.ExactLength != nil) {
		return bad(": min_length, max_length and exact_length are for the string type only, this one is %s.", t)
	}
	for _, n := range []*int{in.MinLength, in.MaxLength, in.ExactLength} {
		if n != nil && *n < 0 {
			return bad(": a length cannot be negative.")
		}
	}
	if t != tenancy.MetaString && t != tenancy.MetaNumber && (len(in.Eq) > 0 || len(in.Ne) > 0) {
		return bad(": eq and ne are for the string and number types only, this one is %s.", t)
	}
	for _, v := range append(slices.Clone(in.Eq), in.Ne...) {
		if _, isNum := v.(float64); (t == tenancy.MetaNumber) != isNum {
			return bad(": eq and ne of a %s hold %ss only, got %v.", t, t, v)
		}
	}
	if in.ObjectType != nil {
		switch {
		case t != tenancy.MetaObject:
			return bad(".object_type is for the object type only, this one is %s.", t)
		case !standardResource(resource):
			return bad(".object_type: a custom nested object holds no further nested objects (one level of nesting).")
		case standardResource(*in.ObjectType) || !customObjectName.MatchString(*in.ObjectType):
			return bad(".object_type must name a custom nested object's schema (lower-case letters, digits and _), got %q.",
				*in.ObjectType)
		}
		d.ObjectType = in.ObjectType
	}
	return d, nil
}

var metaSchemaRoutes = schemaRoutes[tenancy.MetadataSchema, metaSchemaView]{param: "metadataSchemaId", resource: metaSchemaResource,
	notFound: tenancy.ErrMetadataSchemaNotFound, exists: tenancy.ErrMetadataSchemaExists, view: viewMetaSchema,
	create: tenancy.CreateMetadataSchema, table: tenancy.MetadataSchemas,
	update: tenancy.UpdateMetadataSchema}

func (h handler) createMetaSchema(c echo.Context) error {
	return metaSchemaRoutes.createIn(h, c, func(projectID string) (tenancy.MetadataSchema, error) {
		var in metaSchemaInput
		if err := httpx.Bind(c, &in); err != nil {
			return tenancy.MetadataSchema{}, err
		}
		if in.RelatedObject == nil {
			return tenancy.MetadataSchema{}, apierr.InvalidPayload("Property related_object is required: the resource whose " +
				"metadata the schema defines (customer, product, …) or a custom nested object's name.")
		}
		if err := checkRelatedObject(*in.RelatedObject); err != nil {
			return tenancy.MetadataSchema{}, err
		}
		sent, err := in.definitions(true)
		if err != nil {
			return tenancy.MetadataSchema{}, err
		}
		props, err := mergeDefinitions(*in.RelatedObject, nil, sent)
		return tenancy.MetadataSchema{ProjectID: projectID, RelatedObject: *in.RelatedObject, Properties: props,
			AllowDefinedOnly: in.AllowDefinedOnly != nil && *in.AllowDefinedOnly}, err
	}, func(s tenancy.MetadataSchema) error {
		return apierr.Duplicate(metaSchemaResource, fmt.Sprintf("The project already has a metadata schema for %q; "+
			"update that one (PUT …/metadata-schemas/{id}).", s.RelatedObject))
	})
}

func (h handler) updateMetaSchema(c echo.Context) error {
	return metaSchemaRoutes.updateIn(h, c, func() (func(*tenancy.MetadataSchema) (bool, error), error) {
		var in metaSchemaInput
		if err := httpx.Bind(c, &in); err != nil {
			return nil, err
		}
		sent, err := in.definitions(false)
		if err != nil {
			return nil, err
		}
		return func(s *tenancy.MetadataSchema) (bool, error) {
			if in.RelatedObject != nil && *in.RelatedObject != s.RelatedObject {
				return false, apierr.InvalidPayload(fmt.Sprintf("Property related_object cannot change: this schema is %q's.",
					s.RelatedObject))
			}
			if sent == nil && in.AllowDefinedOnly == nil {
				return false, nil // nothing to change
			}
			var err error
			if s.Properties, err = mergeDefinitions(s.RelatedObject, s.Properties, sent); err != nil {
				return false, err
			}
			if in.AllowDefinedOnly != nil {
				s.AllowDefinedOnly = *in.AllowDefinedOnly
			}
			return true, nil
		}, nil
	})
}
