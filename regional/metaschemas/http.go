package metaschemas

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/tenancy"
)

// Register serves the read API of metadata schemas to application keys:
// the reference's MetadataSchemaDeprecated shapes, whose definitions are
// camelCase as the JavaScript SDK's types expect (the management API shows
// the same definitions snake_case).
func Register(g *echo.Group, c *Checker) {
	g.GET("/metadata-schemas", c.list)
	g.GET("/metadata-schemas/:resource", c.get)
}

// definitionView is MetadataSchemaDefinitionDeprecated.
type definitionView struct {
	Type        string   `json:"type"`
	Array       bool     `json:"array"`
	Optional    bool     `json:"optional"`
	ObjectType  *string  `json:"objectType"`
	Eq          []any    `json:"eq,omitempty"`
	Ne          []any    `json:"ne,omitempty"`
	Lt          *float64 `json:"lt,omitempty"`
	Lte         *float64 `json:"lte,omitempty"`
	Gt          *float64 `json:"gt,omitempty"`
	Gte         *float64 `json:"gte,omitempty"`
	Deleted     bool     `json:"deleted"`
	MaxLength   *int     `json:"maxLength,omitempty"`
	MinLength   *int     `json:"minLength,omitempty"`
	ExactLength *int     `json:"exactLength,omitempty"`
}

type schemaView struct {
	ID               string                    `json:"id"`
	RelatedObject    string                    `json:"related_object"`
	Properties       map[string]definitionView `json:"properties"`
	AllowDefinedOnly bool                      `json:"allow_defined_only"`
	CreatedAt        jsonx.Time                `json:"created_at"`
	UpdatedAt        *jsonx.Time               `json:"updated_at"`
	Object           string                    `json:"object"`
}

func view(s tenancy.MetadataSchema) schemaView {
	props := make(map[string]definitionView, len(s.Properties))
	for k, d := range s.Properties {
		props[k] = definitionView{Type: d.Type, Array: d.Array, Optional: d.Optional, ObjectType: d.ObjectType, Eq: d.Eq,
			Ne: d.Ne, Lt: d.Lt, Lte: d.Lte, Gt: d.Gt, Gte: d.Gte, Deleted: d.Deleted, MaxLength: d.MaxLength,
			MinLength: d.MinLength, ExactLength: d.ExactLength}
	}
	return schemaView{ID: s.ID, RelatedObject: s.RelatedObject, Properties: props, AllowDefinedOnly: s.AllowDefinedOnly,
		CreatedAt: jsonx.Time{Time: s.CreatedAt}, UpdatedAt: jsonx.Ptr(s.UpdatedAt), Object: "metadata_schema"}
}

// list is MetadataSchemasListResponseBody: unpaged, under data_ref
// "schemas" as the reference's examples and the JavaScript SDK read it.
// The same array is under data too: the reference's schema requires data
// (its other lists' key), which SDKs generated from it may insist on.
func (c *Checker) list(e echo.Context) error {
	all, err := c.src.MetadataSchemas(e.Request().Context(), httpx.ProjectID(e))
	if err != nil {
		return err
	}
	out := make([]schemaView, len(all))
	for i, s := range all {
		out[i] = view(s)
	}
	return e.JSON(http.StatusOK, map[string]any{"object": "list", "data_ref": "schemas", "schemas": out, "data": out,
		"total": len(out)})
}

// get answers the schema of a resource by its name (customer, product, …,
// or a custom nested object's).
func (c *Checker) get(e echo.Context) error {
	resource := e.Param("resource")
	all, err := c.src.MetadataSchemas(e.Request().Context(), httpx.ProjectID(e))
	if err != nil {
		return err
	}
	s := find(all, resource)
	if s == nil {
		return apierr.NotFound("metadata_schema", resource)
	}
	return e.JSON(http.StatusOK, view(*s))
}
