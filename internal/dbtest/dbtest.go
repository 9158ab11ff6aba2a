// Package dbtest gives tests real database servers: throwaway PostgreSQL
// servers started by pglocal, or CockroachDB through cockroach-go's
// testserver when TALLY_COCKROACH_BINARY names a cockroach binary. Each test
// gets a fresh database; a test can have one server per region and stop one to
// simulate an outage.
package dbtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/cockroach-go/v2/testserver"
	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/pglocal"
)

// EnvCockroach names the cockroach binary to run the database tests on.
const EnvCockroach = "TALLY_COCKROACH_BINARY"

// Server is one database server.
type Server struct {
	engine string
	pg     *pglocal.Server
	dir    string
	crdb   testserver.TestServer
	once   sync.Once

	tmplMu    sync.Mutex
	templates map[string]*templateEntry // by kind, see NewMigratedDatabase
	fileCopy  bool                      // copy templates file by file (PostgreSQL 15 and later)
	pooled    bool                      // one of the run's pool (EnvPool), stopped by its owner
	shared    bool                      // a Shared server: copies of its templates are made ahead
}

type templateEntry struct {
	once sync.Once
	name string
	err  error
	// next is the copy of the template being made while the last one is in
	// use (nil before the first): the tests of a package run one after
	// another, and each waited for its copy (a fifth of a second, over a
	// second on a busy machine, four servers a test) before it began.
	next chan made
}

type made struct {
	url string
	err error
}

var (
	mu     sync.Mutex
	shared = map[string]*sharedEntry{}
)

type sharedEntry struct {
	once sync.Once
	srv  *Server
	err  error
}

// Engine is "cockroachdb" when TALLY_COCKROACH_BINARY is set, else "postgres".
func Engine() string {
	if os.Getenv(EnvCockroach) != "" {
		return "cockroachdb"
	}
	return "postgres"
}

// Shared returns the test process's server called name (one per region, say),
// starting it on first use. Main stops them when the tests are done.
func Shared(t testing.TB, name string) *Server {
	t.Helper()
	e := sharedServer(name)
	if e.err != nil {
		t.Fatalf("dbtest: start %s server: %v", name, e.err)
	}
	return e.srv
}

// StartShared starts the named shared servers at once, in parallel.
func StartShared(t testing.TB, names ...string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() { defer wg.Done(); sharedServer(n) }()
	}
	wg.Wait()
}

// sharedServer returns the named server, starting it on first use; servers
// of different names start concurrently.
func sharedServer(name string) *sharedEntry {
	mu.Lock()
	e, ok := shared[name]
	if !ok {
		e = &sharedEntry{}
		shared[name] = e
	}
	mu.Unlock()
	e.once.Do(func() {
		if pool := PoolDir(); pool != "" {
			e.srv, e.err = fromPool(pool, name)
		} else {
			e.srv, e.err = start()
		}
		if e.srv != nil {
			e.srv.shared = true
		}
	})
	return e
}

// Private starts a server only this test uses, stopped when the test ends;
// for tests that stop a server on purpose.
func Private(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatalf("dbtest: start server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Main runs the tests and then stops every shared server. Use it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	for _, e := range shared {
		if e.srv != nil {
			e.srv.dropAhead()
			e.srv.Stop()
		}
	}
	mu.Unlock()
	os.Exit(code)
}

func start() (*Server, error) {
	if bin := os.Getenv(EnvCockroach); bin != "" {
		ts, err := testserver.NewTestServer(testserver.CockroachBinaryPathOpt(bin))
		if err != nil {
			return nil, err
		}
		if err := ts.WaitForInit(); err != nil {
			ts.Stop()
			return nil, err
		}
		return &Server{engine: "cockroachdb", crdb: ts}, nil
	}
	reapOrphans()
	tmpl, err := pglocal.Template(context.Background(), filepath.Join(os.TempDir(), "tally-pg-template"))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tally-pg-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	pg, err := pglocal.Start(context.Background(), pglocal.Options{Dir: dir, ForTests: true, Template: tmpl})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Server{engine: "postgres", pg: pg, dir: dir}, nil
}

// reapOrphans stops and removes the servers of test processes that died
// without stopping them (killed by a timeout, say), so they do not pile up.
func reapOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "tally-pg-*", "owner.pid"))
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(string(b))
		if pid <= 0 || syscall.Kill(pid, 0) == nil {
			continue // its process is alive
		}
		dir := filepath.Dir(f)
		if bin, err := pglocal.Find(); err == nil {
			_ = exec.Command(filepath.Join(bin, "pg_ctl"), "-D", filepath.Join(dir, "data"), "-m", "immediate", "stop").Run()
		}
		_ = os.RemoveAll(dir)
	}
}

// NewDatabase creates a fresh, empty database and returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	u, err := s.createDatabase(context.Background(), "")
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	s.DropAtEnd(t, u)
	return u
}

// NewMigratedDatabase creates a fresh database as migrate leaves an empty
// one, and returns its URL. On PostgreSQL, migrate runs once per server
// and kind (the schema it makes, "regional" say), on a template database
// that every later database of the kind is copied from, since running
// every migration again costs most of a database's creation; on
// CockroachDB, which has no templates, it runs on each new database. It is
// safe to call from several goroutines.
func (s *Server) NewMigratedDatabase(ctx context.Context, kind string, migrate func(ctx context.Context, url string) error) (string, error) {
	if s.engine == "cockroachdb" {
		u, err := s.createDatabase(ctx, "")
		if err != nil {
			return "", err
		}
		return u, migrate(ctx, u)
	}
	s.tmplMu.Lock()
	if s.templates == nil {
		s.templates = map[string]*templateEntry{}
	}
	e, ok := s.templates[kind]
	if !ok {
		e = &templateEntry{}
		s.templates[kind] = e
	}
	s.tmplMu.Unlock()
	e.once.Do(func() {
		if s.pooled {
			e.name, e.err = s.pooledTemplate(ctx, kind, migrate)
			return
		}
		e.name, e.err = s.makeTemplate(ctx, kind, migrate)
	})
	if e.err != nil {
		return "", fmt.Errorf("template database %s: %w", kind, e.err)
	}
	if !s.shared {
		return s.createDatabase(ctx, e.name)
	}
	return s.copyAhead(ctx, e)
}

// copyAhead returns the copy of e's template made ahead, when there is one
// (waiting for it when it is still being made), and starts making the next.
// Concurrent callers each take the copy the one before them started.
func (s *Server) copyAhead(ctx context.Context, e *templateEntry) (string, error) {
	s.tmplMu.Lock()
	prev := e.next
	next := make(chan made, 1)
	e.next = next
	s.tmplMu.Unlock()
	go func() {
		u, err := s.createDatabase(context.Background(), e.name)
		next <- made{u, err}
	}()
	if prev != nil {
		select {
		case m := <-prev:
			if m.err == nil {
				return m.url, nil
			}
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return s.createDatabase(ctx, e.name)
}

// dropAhead drops the copies made ahead that no test took.
func (s *Server) dropAhead() {
	s.tmplMu.Lock()
	var pending []chan made
	for _, e := range s.templates {
		if e.next != nil {
			pending = append(pending, e.next)
			e.next = nil
		}
	}
	s.tmplMu.Unlock()
	for _, ch := range pending {
		if m := <-ch; m.err == nil {
			_ = s.dropDatabase(context.Background(), m.url)
		}
	}
}

// makeTemplate creates and migrates the template database of kind, then
// closes it to connections, as copying it requires.
func (s *Server) makeTemplate(ctx context.Context, kind string, migrate func(ctx context.Context, url string) error) (string, error) {
	u, err := s.createDatabase(ctx, "")
	if err != nil {
		return "", err
	}
	if err := migrate(ctx, u); err != nil {
		return "", err
	}
	name := dbName(u)
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	// No new connections; the ones migrate left open (golang-migrate's
	// driver keeps one) are ended, which CREATE DATABASE … TEMPLATE waits for.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
		return "", err
	}
	// PostgreSQL 15 copies a template through the write-ahead log by
	// default; copying its files (after a checkpoint, which costs little
	// with fsync off) takes half the time.
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return "", err
	}
	s.tmplMu.Lock()
	s.fileCopy = version >= 150000
	s.tmplMu.Unlock()
	return name, nil
}

// createDatabase creates a fresh database, a copy of template when that is
// not empty, and returns its URL.
func (s *Server) createDatabase(ctx context.Context, template string) (string, error) {
	name := "t_" + ids.New("")
	admin := s.url("postgres")
	if s.engine == "cockroachdb" {
		admin = s.url("defaultdb")
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	q := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	s.tmplMu.Lock()
	fileCopy := s.fileCopy
	s.tmplMu.Unlock()
	if template != "" {
		q += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
		if fileCopy {
			q += " STRATEGY FILE_COPY"
		}
	}
	if _, err := conn.Exec(ctx, q); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	return s.url(name), nil
}

// dbName is the database a URL of s.url names.
func dbName(rawURL string) string {
	u, _ := url.Parse(rawURL)
	return strings.TrimPrefix(u.Path, "/")
}

func (s *Server) url(dbname string) string {
	if s.engine == "cockroachdb" {
		u := *s.crdb.PGURL()
		u.Path = "/" + dbname
		return u.String()
	}
	return s.pg.URL(dbname)
}

// Stop stops the server and removes its data; it is safe to call twice. A
// pool's server is left to the pool's owner.
func (s *Server) Stop() {
	if s.pooled {
		return
	}
	s.once.Do(func() {
		if s.crdb != nil {
			s.crdb.Stop()
			return
		}
		if err := s.pg.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.RemoveAll(s.dir)
	})
}

// Addr is host:port of the server, for tests that point something at it.
func (s *Server) Addr() string {
	u, _ := url.Parse(s.url("x"))
	return u.Host
}

// Deadlocks counts the deadlocks the server has detected since it started,
// as its log reports them ("deadlock detected"): a test of concurrent
// writers fails on any. On CockroachDB, which resolves deadlocks by
// aborting a transaction without logging them, it is always 0.
func (s *Server) Deadlocks(t testing.TB) int {
	t.Helper()
	if s.engine != "postgres" {
		return 0
	}
	if s.pooled {
		t.Fatal("dbtest: Deadlocks reads a private server's log (the pool's holds every package's)")
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		t.Fatalf("dbtest: read the server's log: %v", err)
	}
	return strings.Count(string(b), "deadlock detected")
}
