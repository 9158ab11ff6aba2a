package dbtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pglocal"
)

// EnvPool names a directory whose servers every test process of one run
// shares (see ./internal/dbtest/testpool, which make test runs go test
// under). Without it each test process starts servers of its own: each
// package's tests then pay a second and a half to start four servers and
// three more to migrate their template databases, which over the
// project's packages was minutes of a run.
const EnvPool = "TALLY_TEST_POOL"

// PoolDir is the pool directory of this run, or "" outside a pool.
func PoolDir() string {
	if Engine() != "postgres" {
		return ""
	}
	return os.Getenv(EnvPool)
}

// fromPool returns the pool's server called name, starting it if no test
// process of the run has yet. It is never stopped from here: the pool's
// owner stops it when the run ends.
func fromPool(pool, name string) (*Server, error) {
	dir := filepath.Join(pool, name)
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	portFile := filepath.Join(dir, "port")
	if b, err := os.ReadFile(portFile); err == nil {
		port, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("pool server %s: port file: %w", name, err)
		}
		pg, err := pglocal.Attach(dir, port)
		if err != nil {
			return nil, err
		}
		return &Server{engine: "postgres", pg: pg, dir: dir, pooled: true}, nil
	}
	tmpl, err := pglocal.Template(context.Background(), filepath.Join(os.TempDir(), "tally-pg-template"))
	if err != nil {
		return nil, err
	}
	// The whole run's tests share it: room for two packages' worth of
	// stacks at once.
	pg, err := pglocal.Start(context.Background(), pglocal.Options{Dir: dir, ForTests: true, Template: tmpl, MaxConnections: 400})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(portFile, []byte(strconv.Itoa(pg.Port)), 0o644); err != nil {
		_ = pg.Stop()
		return nil, err
	}
	return &Server{engine: "postgres", pg: pg, dir: dir, pooled: true}, nil
}

// pooledTemplate is makeTemplate for a pool's server: the first process of
// the run to need kind makes it, the others read its name.
func (s *Server) pooledTemplate(ctx context.Context, kind string, migrate func(ctx context.Context, url string) error) (string, error) {
	unlock, err := lockFile(filepath.Join(s.dir, "template-"+kind+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	nameFile := filepath.Join(s.dir, "template-"+kind)
	if b, err := os.ReadFile(nameFile); err == nil {
		return string(b), s.readFileCopy(ctx)
	}
	name, err := s.makeTemplate(ctx, kind, migrate)
	if err != nil {
		return "", err
	}
	return name, os.WriteFile(nameFile, []byte(name), 0o644)
}

// readFileCopy sets fileCopy from the server's version, as makeTemplate
// does for the template it makes.
func (s *Server) readFileCopy(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return err
	}
	s.tmplMu.Lock()
	s.fileCopy = version >= 150000
	s.tmplMu.Unlock()
	return nil
}

// DropAtEnd drops the database at rawURL when t ends, on a pool's server,
// where databases would otherwise pile up for the whole run; elsewhere the
// server's end removes them. Register it before whatever uses the
// database, so that it runs after that is closed.
func (s *Server) DropAtEnd(t testing.TB, rawURL string) {
	if !s.pooled {
		return
	}
	t.Cleanup(func() {
		if err := s.dropDatabase(context.Background(), rawURL); err != nil {
			t.Errorf("dbtest: drop %s: %v", dbName(rawURL), err)
		}
	})
}

// dropDatabase drops the database at rawURL, ending its sessions.
func (s *Server) dropDatabase(ctx context.Context, rawURL string) error {
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{dbName(rawURL)}.Sanitize()+" WITH (FORCE)")
	return err
}

// lockFile takes an exclusive lock on path, shared by every process of the
// machine, and returns its release.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
