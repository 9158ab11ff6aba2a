package regional_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbschema"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/tenancy"
)

// A regional instance is not ready on a schema older than its binary
// needs: its cluster's database (which its init container migrates) and
// the directory (which management's release migrates, maybe after this
// region rolled out), each named with what to do.
func TestReadinessWaitsForBothSchemas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dbtest.StartShared(t, "tenancy", "api")
	tenancyURL := dbtest.Shared(t, "tenancy").NewDatabase(t)
	regionalURL := dbtest.Shared(t, "api").NewDatabase(t)
	oldTenancy, tenancyNeed := dbtest.MigrationsBelowNeed(t, tenancy.Migrations, tenancy.MigrationsDir)
	oldRegional, regionalNeed := dbtest.MigrationsBelowNeed(t, regional.Migrations, regional.MigrationsDir)
	if err := dbschema.Migrate(ctx, tenancyURL, oldTenancy, tenancy.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	if err := dbschema.Migrate(ctx, regionalURL, oldRegional, regional.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	app, err := regional.New(ctx, regional.Config{Cluster: "api", DatabaseURL: regionalURL, TenancyURL: tenancyURL,
		IdentitySecret: stacktest.Secret, OperatorSecret: []byte("schema test operator secret 0123456789"),
		Log: telemetry.NewLogger(io.Discard, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	admin := serveAdmin(t, ctx, app.Ready)
	readyz := func() (int, string) {
		r := stacktest.Do(t, http.DefaultClient, "GET", admin+"/readyz", nil, nil)
		return r.Status, string(r.Body)
	}
	behind := func(name string, need uint) string {
		return name + "'s schema is at version " + strconv.Itoa(int(need-1)) + ", this binary needs " + strconv.Itoa(int(need))
	}

	want := behind("the cluster's database", regionalNeed) + ": migrate it"
	if s, body := readyz(); s != 503 || !strings.Contains(body, want) {
		t.Fatalf("/readyz with both schemas behind: %d %s, want 503 saying %q", s, body, want)
	}
	if err := dbschema.Migrate(ctx, regionalURL, regional.Migrations, regional.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	want = behind("the directory", tenancyNeed) + ": migrate the tenancy database (management's release) first"
	stacktest.Eventually(t, 10*time.Second, "/readyz naming the directory's schema", func() bool {
		s, body := readyz()
		return s == 503 && strings.Contains(body, want)
	})
	if err := dbschema.Migrate(ctx, tenancyURL, tenancy.Migrations, tenancy.MigrationsDir); err != nil {
		t.Fatal(err)
	}
	stacktest.Eventually(t, 10*time.Second, "ready once both are migrated", func() bool {
		s, _ := readyz()
		return s == 200
	})
}
