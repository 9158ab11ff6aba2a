package db

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A CockroachDB below the minimum, or one whose patch lacks the SKIP
// LOCKED fix, or with READ COMMITTED off, is refused with what to change;
// PostgreSQL is not judged.
func TestJudgeServer(t *testing.T) {
	for _, c := range []struct {
		version, rc string
		refused     string
	}{
		{"PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu", "", ""},
		{"CockroachDB CCL v24.1.5 (x86_64-pc-linux-gnu, built 2024/09/12)", "true", ""},
		{"CockroachDB CCL v25.2.0 (x86_64-pc-linux-gnu)", "true", ""},
		{"CockroachDB OSS v24.2.3 (aarch64-unknown-linux-gnu)", "true", ""},
		{"CockroachDB CCL v24.1.4 (x86_64-pc-linux-gnu)", "true", "too old"},
		{"CockroachDB CCL v24.2.2 (x86_64-pc-linux-gnu)", "true", "too old"},
		{"CockroachDB CCL v23.2.9 (x86_64-pc-linux-gnu)", "true", "too old"},
		{"CockroachDB CCL v25.1.0 (x86_64-pc-linux-gnu)", "false", "READ COMMITTED is off"},
		{"CockroachDB CCL something else", "true", "cannot read"},
	} {
		t.Run(c.version, func(t *testing.T) {
			err := JudgeServer(c.version, c.rc)
			if (c.refused == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), c.refused) || !errors.Is(err, ErrServerRefused))) {
				t.Fatalf("%s with read committed %s: %v, want %q", c.version, c.rc, err, c.refused)
			}
		})
	}
}

// Exports read one snapshot for minutes: REPEATABLE READ on PostgreSQL, a
// historical read on CockroachDB (whose present-time long read would be
// SERIALIZABLE, pushed by every overlapping write and end in a retry
// error), chosen by the server's version string.
func TestTheSnapshotIsTheDialects(t *testing.T) {
	for version, want := range map[string]Dialect{
		"CockroachDB CCL v24.1.5 (x86_64-pc-linux-gnu, built 2024/09/12)":  CockroachDB,
		"PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu": PostgreSQL,
	} {
		if d := dialectOf(version); d != want {
			t.Errorf("%q: %v, want %v", version, d, want)
		}
	}
	crdb := snapshotOptions(CockroachDB)
	if !strings.Contains(crdb.BeginQuery, "AS OF SYSTEM TIME") {
		t.Errorf("CockroachDB's snapshot begins with %q, not a historical read", crdb.BeginQuery)
	}
	pg := snapshotOptions(PostgreSQL)
	if pg.BeginQuery != "" || pg.IsoLevel != "repeatable read" || pg.AccessMode != "read only" {
		t.Errorf("PostgreSQL's snapshot: %+v", pg)
	}
}

// fakeServer answers CheckServer's two reads as a server of version with
// READ COMMITTED rc would, or fails them with err, or (hang) waits for the
// query's context to end.
type fakeServer struct {
	mu      sync.Mutex
	version string
	rc      bool
	err     error
	hang    bool
	asked   int
}

func (f *fakeServer) set(version string, rc bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version, f.rc, f.err = version, rc, err
}

func (f *fakeServer) QueryRow(ctx context.Context, sql string, _ ...any) pgx.Row {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.hang {
		f.mu.Unlock()
		<-ctx.Done()
		f.mu.Lock()
		return fakeRow{err: ctx.Err()}
	}
	if f.err != nil {
		return fakeRow{err: f.err}
	}
	if strings.Contains(sql, "version()") {
		return fakeRow{val: f.version}
	}
	return fakeRow{val: f.rc}
}

func (f *fakeServer) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	panic("not asked")
}
func (f *fakeServer) Query(context.Context, string, ...any) (pgx.Rows, error) { panic("not asked") }
func (f *fakeServer) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults  { panic("not asked") }

type fakeRow struct {
	val any
	err error
}

func (r fakeRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	switch d := dest[0].(type) {
	case *string:
		*d = r.val.(string)
	case *any:
		*d = r.val
	}
	return nil
}

// A service checks its database server at start (ServerGate.Start): a
// CockroachDB Tally does not run on stops the start, saying what to
// change; a server it cannot reach within the wait does not, and its
// readiness (ServerGate.Check) then refuses that server until it passes:
// an upgrade, or READ COMMITTED turned on, is seen at the next check
// after the refusal's 5 s; once passed, the server is not asked again.
func TestAServerIsCheckedAtStartOrElseInReadiness(t *testing.T) {
	ctx := context.Background()
	old := "CockroachDB CCL v23.2.9 (x86_64-pc-linux-gnu)"
	good := "CockroachDB CCL v24.1.5 (x86_64-pc-linux-gnu, built 2024/09/12)"

	f := &fakeServer{}
	f.set(old, true, nil)
	if err := NewServerGate(f, "the cluster's database").Start(ctx, time.Second); !errors.Is(err, ErrServerRefused) ||
		!strings.Contains(err.Error(), "the cluster's database") || !strings.Contains(err.Error(), "too old") {
		t.Fatalf("start on %s: %v, want it refused saying so", old, err)
	}
	f.set(good, false, nil)
	if err := NewServerGate(f, "x").Start(ctx, time.Second); !errors.Is(err, ErrServerRefused) ||
		!strings.Contains(err.Error(), "sql.txn.read_committed_isolation.enabled = true") {
		t.Fatalf("start with READ COMMITTED off: %v", err)
	}
	f.set("PostgreSQL 15.18 on x86_64-pc-linux-gnu", false, nil)
	if err := NewServerGate(f, "x").Start(ctx, time.Second); err != nil {
		t.Fatalf("start on PostgreSQL: %v", err)
	}

	// Down at start: the start goes on, readiness checks.
	f.set(old, true, &pgconn.ConnectError{})
	g := NewServerGate(f, "the cluster's database")
	if err := g.Start(ctx, time.Second); err != nil {
		t.Fatalf("start with the database down: %v", err)
	}
	if err := g.Check(ctx); err == nil || errors.Is(err, ErrServerRefused) {
		t.Fatalf("readiness with the database down: %v", err)
	}
	f.set(old, true, nil) // back, and too old
	if err := g.Check(ctx); !errors.Is(err, ErrServerRefused) {
		t.Fatalf("readiness on %s: %v", old, err)
	}
	f.set(good, true, nil) // upgraded: the refusal holds for its 5 s
	if err := g.Check(ctx); !errors.Is(err, ErrServerRefused) {
		t.Fatalf("readiness just after the refusal: %v", err)
	}
	g.next = time.Now()
	if err := g.Check(ctx); err != nil {
		t.Fatalf("readiness once upgraded: %v", err)
	}
	f.set(old, false, nil)
	asked := f.asked
	if err := g.Check(ctx); err != nil || f.asked != asked {
		t.Fatalf("a server that passed is not asked again: %v, %d more questions", err, f.asked-asked)
	}

	// Not answering within the wait: the start goes on.
	hung := &fakeServer{hang: true}
	began := time.Now()
	if err := NewServerGate(hung, "x").Start(ctx, 100*time.Millisecond); err != nil || time.Since(began) > 2*time.Second {
		t.Fatalf("start with the server not answering: %v after %s", err, time.Since(began))
	}
}
