package metaschemas

import (
	"context"
	"net/http"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/tenancy"
)

// Source gives a project's metadata schemas: the tenancy resolver, whose
// cache drops a project's list when the directory logs a change of it.
type Source interface {
	MetadataSchemas(ctx context.Context, projectID string) ([]tenancy.MetadataSchema, error)
}

// Checker checks writes' metadata against their project's schemas.
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
