package management_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/management"
	"github.com/tallyhq/tally/tenancy"
)

// `tally management` does not migrate before it serves (the manifests'
// init container does): started on an older directory, it is not ready
// until the directory is migrated.
func TestManagementIsNotReadyOnAnOlderDirectorySchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, need := dbtest.DatabaseBelowNeed(t, dbtest.Shared(t, "tenancy"), tenancy.Migrations, tenancy.MigrationsDir)
	app, err := management.New(ctx, management.Config{TenancyURL: url, IdentitySecret: stacktest.Secret,
		OperatorSecret: []byte("schema test operator secret 0123456789"), Log: telemetry.NewLogger(io.Discard, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	want := "the directory's schema is at version " + strconv.Itoa(int(need-1)) + ", this binary needs " + strconv.Itoa(int(need)) +
		": migrate the tenancy database (management's release) first"
	if err := app.Ready(ctx); !errors.Is(err, dbschema.ErrBehind) || err.Error() != want {
		t.Fatalf("Ready on the old schema: %v, want %q", err, want)
	}
	if err := dbschema.Migrate(ctx, url, tenancy.Migrations, tenancy.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	stacktest.Eventually(t, 10*time.Second, "ready once migrated", func() bool { return app.Ready(ctx) == nil })
}
