package tenancy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/tenancy"
)

// Schemas are a project's, names are unique per project, and a change
// reaches another instance's resolver through the change log.
func TestEventSchemasStoreAndResolver(t *testing.T) {
	ctx := context.Background()
	pool := directory(t)
	tx := func(f func(tx pgx.Tx) error) error { return db.InTx(ctx, pool, f) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tx(func(q pgx.Tx) error {
		return tenancy.UpsertCluster(ctx, q, tenancy.Cluster{Name: "api", Region: "europe", Kind: tenancy.Shared,
			APIHost: "api.example.com", UpstreamURL: "http://10.0.0.1"})
	}))
	var a, b tenancy.Project
	must(tx(func(q pgx.Tx) error {
		a, b = tenancy.Project{Name: "a", Cluster: "api"}, tenancy.Project{Name: "b", Cluster: "api"}
		if _, _, err := tenancy.CreateProject(ctx, q, &a); err != nil {
			return err
		}
		_, _, err := tenancy.CreateProject(ctx, q, &b)
		return err
	}))

	// Another instance (a regional one) reads through its own resolver.
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go r.Watch(wctx, 500*time.Millisecond)
	if got, err := r.EventSchemas(ctx, a.ID); err != nil || len(got) != 0 {
		t.Fatalf("no schemas yet: %v %v", got, err)
	}

	s := tenancy.EventSchema{ProjectID: a.ID, Name: "review",
		Properties: map[string]tenancy.EventProperty{"stars": {Type: tenancy.PropNumber}}}
	must(tx(func(q pgx.Tx) error { return tenancy.CreateEventSchema(ctx, q, &s) }))
	if s.ID[:3] != "ms_" || s.CreatedAt.IsZero() || s.UpdatedAt != nil {
		t.Fatalf("created: %+v", s)
	}
	waitFor(t, func() bool { got, _ := r.EventSchemas(ctx, a.ID); return len(got) == 1 && got[0].Name == "review" })

	// The name is taken in a, free in b.
	dup := tenancy.EventSchema{ProjectID: a.ID, Name: "review"}
	if err := tx(func(q pgx.Tx) error { return tenancy.CreateEventSchema(ctx, q, &dup) }); !errors.Is(err, tenancy.ErrEventSchemaExists) {
		t.Fatalf("duplicate name: %v", err)
	}
	other := tenancy.EventSchema{ProjectID: b.ID, Name: "review"}
	must(tx(func(q pgx.Tx) error { return tenancy.CreateEventSchema(ctx, q, &other) }))
	if _, err := tenancy.EventSchemas.Get(ctx, pool, b.ID, s.ID); !errors.Is(err, tenancy.ErrEventSchemaNotFound) {
		t.Fatalf("another project's schema: %v", err)
	}
	if err := tx(func(q pgx.Tx) error { return tenancy.EventSchemas.Delete(ctx, q, b.ID, s.ID) }); !errors.Is(err, tenancy.ErrEventSchemaNotFound) {
		t.Fatalf("deleting another project's schema: %v", err)
	}

	// An update and a delete reach the resolver too.
	s.Properties["stars"] = tenancy.EventProperty{Type: tenancy.PropString, Optional: true, Deleted: true}
	must(tx(func(q pgx.Tx) error { return tenancy.UpdateEventSchema(ctx, q, &s) }))
	waitFor(t, func() bool {
		got, _ := r.EventSchemas(ctx, a.ID)
		return len(got) == 1 && got[0].Properties["stars"] == tenancy.EventProperty{Type: tenancy.PropString, Optional: true, Deleted: true}
	})
	must(tx(func(q pgx.Tx) error { return tenancy.EventSchemas.Delete(ctx, q, a.ID, s.ID) }))
	waitFor(t, func() bool { got, _ := r.EventSchemas(ctx, a.ID); return len(got) == 0 })
	if got, err := r.EventSchemas(ctx, b.ID); err != nil || len(got) != 1 || got[0].ID != other.ID {
		t.Fatalf("b's schemas: %v %v", got, err)
	}
	// A deleted schema's name is free again.
	again := tenancy.EventSchema{ProjectID: a.ID, Name: "review"}
	must(tx(func(q pgx.Tx) error { return tenancy.CreateEventSchema(ctx, q, &again) }))
}
