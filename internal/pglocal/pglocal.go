// Package pglocal starts and stops local PostgreSQL servers for development
// and tests: initdb into a data directory, pg_ctl on a free loopback port.
// As root it runs them as the `postgres` OS user that Debian's package
// creates, since initdb refuses to run as root.
package pglocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// Options for a server.
type Options struct {
	// Dir holds the cluster's data ("data/") and log; it is created when missing
	// and an existing cluster in it is reused.
	Dir string
	// Port to listen on; 0 picks a free one; -1 initialises the data
	// directory without starting a server.
	Port int
	// ForTests trades durability for speed: fsync and synchronous_commit off,
	// small shared_buffers. Benchmarks and `tally dev` leave it off.
	ForTests bool
	// MaxConnections defaults to 200.
	MaxConnections int
	// Template, when set, is an initialised data directory (see Template)
	// copied instead of running initdb, which takes seconds.
	Template string
}

// Server is a running PostgreSQL server.
type Server struct {
	Port    int
	dataDir string
	bin     string
	cred    *syscall.Credential
}

// User is the superuser every server is initialised with.
const User = "tally"

// Find returns the directory holding initdb, pg_ctl and postgres: PATH first,
// then Debian's /usr/lib/postgresql/<version>/bin, newest version first.
func Find() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	return "", errors.New("pglocal: PostgreSQL not found: install it (apt-get install postgresql) or put initdb and pg_ctl on PATH")
}

func versionOf(p string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
	return v
}

// Start initialises the cluster in o.Dir when needed and starts it.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dataDir: filepath.Join(o.Dir, "data")}
	if s.cred, err = credential(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := s.chown(o.Dir); err != nil {
		return nil, err
	}
	if err := s.letTraverse(o.Dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(s.dataDir, "PG_VERSION")); err != nil && o.Template != "" {
		if out, err := exec.CommandContext(ctx, "cp", "-a", o.Template, s.dataDir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("pglocal: copy template: %w\n%s", err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(s.dataDir, "PG_VERSION")); err != nil {
		args := []string{"-D", s.dataDir, "-U", User, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions"}
		if o.ForTests {
			args = append(args, "--no-sync")
		}
		if out, err := s.run(ctx, "initdb", args...); err != nil {
			return nil, fmt.Errorf("pglocal: initdb: %w\n%s", err, out)
		}
	}
	if o.Port < 0 { // initialise only
		return s, nil
	}
	// A previous run killed without stopping leaves its server running (pg_ctl
	// detaches it), or a stale pid file behind: stop the one, remove the
	// other, so a crashed `tally dev` can simply be started again.
	if err := s.stopLeftover(ctx); err != nil {
		return nil, err
	}
	_ = s.removeStalePID()

	maxConns := o.MaxConnections
	if maxConns == 0 {
		maxConns = 200
	}
	settings := []string{
		"-c listen_addresses=127.0.0.1",
		"-c unix_socket_directories=''",
		"-c max_connections=" + strconv.Itoa(maxConns),
	}
	if o.ForTests {
		settings = append(settings, "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off",
			"-c shared_buffers=32MB")
	}
	// For diagnosis: extra server settings, space-separated name=value pairs
	// (say, shared_preload_libraries=pg_stat_statements).
	for _, kv := range strings.Fields(os.Getenv("TALLY_PG_SETTINGS")) {
		settings = append(settings, "-c "+kv)
	}
	for attempt := 0; ; attempt++ {
		port := o.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		s.Port = port
		opts := strings.Join(append(settings, "-p "+strconv.Itoa(port)), " ")
		out, err := s.run(ctx, "pg_ctl", "-D", s.dataDir, "-l", filepath.Join(o.Dir, "postgres.log"), "-w", "-t", "60",
			"-o", opts, "start")
		if err == nil {
			break
		}
		if o.Port != 0 || attempt >= 3 {
			log, _ := os.ReadFile(filepath.Join(o.Dir, "postgres.log"))
			return nil, fmt.Errorf("pglocal: pg_ctl start: %w\n%s\n%s", err, out, tail(log, 2000))
		}
	}
	return s, nil
}

// credential is the OS user servers run as: postgres when this process is
// root, since initdb and postgres refuse root; nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("pglocal: running as root needs the 'postgres' OS user (Debian's postgresql package creates it)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Attach returns the server another process started in dir (Options.Dir)
// and left running on port, so that it can be used and stopped from here.
func Attach(dir string, port int) (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	return &Server{Port: port, dataDir: filepath.Join(dir, "data"), bin: bin, cred: cred}, nil
}

// Template returns an initialised, never started data directory under dir
// (made once with initdb, then reused), for Options.Template. Concurrent
// callers, in this process or others, are safe: the directory appears whole
// by an atomic rename.
func Template(ctx context.Context, dir string) (string, error) {
	final := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(final, "PG_VERSION")); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(dir, "init-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	s, err := Start(ctx, Options{Dir: work, ForTests: true, Port: -1})
	if err != nil {
		return "", err
	}
	_ = s
	if err := os.Rename(filepath.Join(work, "data"), final); err != nil {
		if _, statErr := os.Stat(filepath.Join(final, "PG_VERSION")); statErr == nil {
			return final, nil // another caller won the race
		}
		return "", err
	}
	return final, nil
}

// URL connects as the superuser to database name.
func (s *Server) URL(name string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, s.Port, name)
}

// CreateDatabase makes database name if it does not exist yet.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// Stop shuts the server down (fast mode: clients are disconnected).
func (s *Server) Stop() error {
	out, err := s.run(context.Background(), "pg_ctl", "-D", s.dataDir, "-m", "fast", "-w", "-t", "30", "stop")
	if err != nil {
		return fmt.Errorf("pglocal: stop: %w\n%s", err, out)
	}
	return nil
}

func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// Its own process group: a Ctrl-C sent to `tally dev` must not reach the
	// postmaster before we stop it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.Dir = os.TempDir()
	err := cmd.Run()
	return buf.Bytes(), err
}

func (s *Server) chown(dir string) error {
	if s.cred == nil {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(s.cred.Uid), int(s.cred.Gid))
	})
}

// letTraverse makes sure the postgres user can reach dir: every ancestor
// gets the others' execute bit (traversal only, not listing) if it lacks it.
func (s *Server) letTraverse(dir string) error {
	if s.cred == nil {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("pglocal: let the postgres user reach %s: %w", dir, err)
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// stopLeftover stops a server an earlier process started on this data
// directory and never stopped.
func (s *Server) stopLeftover(ctx context.Context) error {
	if _, err := s.run(ctx, "pg_ctl", "-D", s.dataDir, "status"); err != nil {
		return nil // exit status 3: no server running (4: no data directory)
	}
	out, err := s.run(ctx, "pg_ctl", "-D", s.dataDir, "-m", "fast", "-w", "-t", "30", "stop")
	if err != nil {
		return fmt.Errorf("pglocal: stopping the server an earlier run left on %s: %w\n%s", s.dataDir, err, out)
	}
	return nil
}

func (s *Server) removeStalePID() error {
	pidFile := filepath.Join(s.dataDir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil
	}
	pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		return nil // still running: pg_ctl will say so
	}
	return os.Remove(pidFile)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
