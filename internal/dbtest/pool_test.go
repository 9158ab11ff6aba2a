package dbtest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pglocal"
)

// Two processes of a run asking for the pool's server called "x" get one
// server, whose template is migrated once; a database made for a test is
// dropped when the test ends, and the server is left running for the next.
func TestAPoolsServerAndTemplateAreMadeOncePerRun(t *testing.T) {
	if Engine() != "postgres" {
		t.Skip("the pool holds PostgreSQL servers")
	}
	pool := t.TempDir()
	first, err := fromPool(pool, "x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pg, err := pglocal.Attach(first.dir, first.pg.Port)
		if err == nil {
			err = pg.Stop()
		}
		if err != nil {
			t.Error(err)
		}
	})
	second, err := fromPool(pool, "x") // as another test process would
	if err != nil {
		t.Fatal(err)
	}
	if first.pg.Port != second.pg.Port || !first.pooled || !second.pooled {
		t.Fatalf("a second caller got port %d (pooled %v), want the first's %d", second.pg.Port, second.pooled, first.pg.Port)
	}
	var migrations atomic.Int32
	migrate := func(ctx context.Context, u string) error {
		migrations.Add(1)
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE made_once (id INT PRIMARY KEY)")
		return err
	}
	ctx := context.Background()
	var dropped string
	t.Run("use", func(t *testing.T) {
		for _, s := range []*Server{first, second} {
			u, err := s.NewMigratedDatabase(ctx, "k", migrate)
			if err != nil {
				t.Fatal(err)
			}
			s.DropAtEnd(t, u)
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "INSERT INTO made_once VALUES (1)"); err != nil {
				t.Fatalf("a database of the template lacks its table: %v", err)
			}
			conn.Close(ctx)
			dropped = dbName(u)
		}
	})
	if n := migrations.Load(); n != 1 {
		t.Fatalf("the template was migrated %d times, want once", n)
	}
	second.Stop() // a test process's end leaves the pool's server running
	conn, err := pgx.Connect(ctx, first.url("postgres"))
	if err != nil {
		t.Fatalf("the pool's server stopped with a test process: %v", err)
	}
	defer conn.Close(ctx)
	var left bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", dropped).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left {
		t.Fatalf("database %s outlived its test", dropped)
	}
}

// A shared server makes the next copy of a template while the last is in
// use, hands it to the next caller, and drops what no caller took.
func TestTheNextCopyOfATemplateIsMadeAhead(t *testing.T) {
	if Engine() != "postgres" {
		t.Skip("CockroachDB has no templates")
	}
	pool := t.TempDir()
	s, err := fromPool(pool, "ahead")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pg, err := pglocal.Attach(s.dir, s.pg.Port)
		if err == nil {
			err = pg.Stop()
		}
		if err != nil {
			t.Error(err)
		}
	})
	s.shared = true // as sharedServer marks it
	ctx := context.Background()
	migrate := func(ctx context.Context, u string) error {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE t (id INT PRIMARY KEY)")
		return err
	}
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	copies := func() []string {
		rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 't\\_%' AND datallowconn ORDER BY datname")
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	first, err := s.NewMigratedDatabase(ctx, "k", migrate)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(copies()) != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no copy was made ahead: the server holds %v", copies())
		}
	}
	var ahead string
	for _, n := range copies() {
		if n != dbName(first) {
			ahead = n
		}
	}
	second, err := s.NewMigratedDatabase(ctx, "k", migrate)
	if err != nil {
		t.Fatal(err)
	}
	if dbName(second) != ahead {
		t.Fatalf("the second caller got %s, want the copy made ahead, %s", dbName(second), ahead)
	}
	s.dropAhead()
	if got := copies(); len(got) != 2 {
		t.Fatalf("after dropping what no caller took, the server holds %v, want the two copies handed out", got)
	}
}
