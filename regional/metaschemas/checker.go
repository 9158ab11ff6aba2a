package metaschemas

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/tenancy"
)

// Source gives a project's metadata schemas: the tenancy resolver, whose
// cache drops a project's list when the directory logs a change of it.
type Source interface {
	MetadataSchemas(ctx context.Context, projectID string) ([]tenancy.MetadataSchema, error)
}

// Checker checks writes' metadata against their project's schemas. A nil
// Checker takes any metadata (tests of a package alone).
type Checker struct{ src Source }

// New makes a checker reading schemas from src.
func New(src Source) *Checker { return &Checker{src: src} }

// CheckMetadata refuses md, the metadata a write of resource leaves (a
// create's, or an update's merged result), when the project's schema for
// resource finds it wrong: 400 metadata_validation_failed whose details
// name every failing key. A resource without a schema takes anything.
func (c *Checker) CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error {
	if c == nil {
		return nil
	}
	all, err := c.src.MetadataSchemas(ctx, projectID)
	if err != nil {
		return err
	}
	return Check(all, resource, md)
}

// Check is CheckMetadata on a project's schemas already read: a job
// checking many items reads them once.
func Check(all []tenancy.MetadataSchema, resource string, md map[string]any) error {
	s := find(all, resource)
	if s == nil {
		return nil
	}
	if p := Problems(*s, md, func(name string) *tenancy.MetadataSchema { return find(all, name) }); len(p) > 0 {
		return Refused(p)
	}
	return nil
}

// Refused is the reference's answer to metadata a schema refuses.
func Refused(problems []string) *apierr.Error {
	return apierr.New(http.StatusBadRequest, "metadata_validation_failed", "Metadata validation failed",
		strings.Join(problems, ", "))
}

func find(all []tenancy.MetadataSchema, resource string) *tenancy.MetadataSchema {
	for i := range all {
		if all[i].RelatedObject == resource {
			return &all[i]
		}
	}
	return nil
}

// Cells returns how an import's text cell of a key of resource's metadata
// reads, by the project's schema read once for the import: a number, a
// boolean, an object as JSON, an array as a comma list of its items, any
// other definition's as the text. A key the schema does not define, and a
// cell its definition cannot read, is true, false or null as in JSON, else
// the text, which the check then refuses if the schema does.
func (c *Checker) Cells(ctx context.Context, projectID, resource string) (func(key, cell string) any, error) {
	var s *tenancy.MetadataSchema
	if c != nil {
		all, err := c.src.MetadataSchemas(ctx, projectID)
		if err != nil {
			return nil, err
		}
		s = find(all, resource)
	}
	return func(key, cell string) any {
		if s != nil {
			if d, ok := s.Properties[key]; ok && !d.Deleted {
				return typedCell(d, cell)
			}
		}
		return untypedCell(cell)
	}, nil
}

func untypedCell(v string) any {
	switch v {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	return v
}

func typedCell(d tenancy.MetaDefinition, v string) any {
	if d.Array {
		parts := strings.Split(v, ",")
		out := make([]any, len(parts))
		one := d
		one.Array = false
		for i, p := range parts {
			out[i] = typedCell(one, strings.TrimSpace(p))
		}
		return out
	}
	switch d.Type {
	case tenancy.MetaNumber:
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f
		}
	case tenancy.MetaBoolean:
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	case tenancy.MetaObject:
		var o map[string]any
		if json.Unmarshal([]byte(v), &o) == nil && o != nil {
			return o
		}
	default:
		return v // text kept as text, "true" included
	}
	return untypedCell(v)
}
