package pglocal_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/pglocal"
)

// The child mode of TestStartAfterTheStarterWasKilled: start a server, say
// its port, and wait to be killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("PGLOCAL_TEST_CHILD"); dir != "" {
		s, err := pglocal.Start(context.Background(), pglocal.Options{Dir: dir, ForTests: true})
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		os.Stdout.WriteString(strconv.Itoa(s.Port) + "\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A process killed while its server runs leaves that server behind; the next
// Start on the same directory stops it and serves again (before: "another
// server might be running" until someone killed it by hand).
func TestStartAfterTheStarterWasKilled(t *testing.T) {
	if _, err := pglocal.Find(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		_ = os.Chmod(dir, 0o755)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "PGLOCAL_TEST_CHILD="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	oldPort, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("child said %q", buf[:n])
	}
	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()
	if !answers(oldPort) {
		t.Fatal("the killed process's server is not running: the test shows nothing")
	}

	ctx := context.Background()
	s, err := pglocal.Start(ctx, pglocal.Options{Dir: dir, ForTests: true})
	if err != nil {
		t.Fatalf("start after a kill: %v", err)
	}
	defer s.Stop()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query: %v", err)
	}
	if s.Port != oldPort && answers(oldPort) {
		t.Errorf("the left-over server on %d still runs beside the new one on %d", oldPort, s.Port)
	}
}

func answers(port int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, "postgres://"+pglocal.User+"@127.0.0.1:"+strconv.Itoa(port)+"/postgres?sslmode=disable")
	if err != nil {
		return false
	}
	_ = c.Close(ctx)
	return true
}
