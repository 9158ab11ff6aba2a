// Command testpool runs a command (go test, say) with a pool of database
// servers that every test process it starts shares (dbtest.EnvPool), and
// stops them when the command ends. The servers start on first use, each
// by whichever test process needs it first; the template databases are
// migrated once for the whole run.
//
//	go run ./internal/dbtest/testpool -- go test -race ./...
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/tallyhq/tally/internal/conformance"
	"github.com/tallyhq/tally/internal/dbtest"
	"github.com/tallyhq/tally/internal/pglocal"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: testpool -- command [args...]")
		os.Exit(2)
	}
	reap()
	pool, err := os.MkdirTemp("", "tally-pool-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testpool:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(pool, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "testpool:", err)
		os.Exit(1)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), dbtest.EnvPool+"="+pool)
	// The reference's conformance check, parsed once for the whole run
	// here rather than in every test process (internal/conformance).
	if !conformance.Skipped() {
		sock := filepath.Join(pool, "conformance.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testpool:", err)
			os.Exit(1)
		}
		defer ln.Close()
		go func() {
			if err := conformance.Serve(ln); err != nil {
				fmt.Fprintln(os.Stderr, "testpool: conformance server:", err)
			}
		}()
		cmd.Env = append(cmd.Env, conformance.EnvSocket+"="+sock)
	}
	// A Ctrl-C reaches the command through the terminal's process group;
	// this process waits for it to end and then stops the servers.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	code := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			fmt.Fprintln(os.Stderr, "testpool:", err)
			code = 1
		} else {
			code = exit.ExitCode()
		}
	}
	if err := stop(pool); err != nil {
		fmt.Fprintln(os.Stderr, "testpool:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// stop stops every server of pool and removes it.
func stop(pool string) error {
	ports, _ := filepath.Glob(filepath.Join(pool, "*", "port"))
	var errs []error
	for _, f := range ports {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		port, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		pg, err := pglocal.Attach(filepath.Dir(f), port)
		if err == nil {
			err = pg.Stop()
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, os.RemoveAll(pool))...)
}

// reap stops and removes the pools of runs that died without doing so.
func reap() {
	owners, _ := filepath.Glob(filepath.Join(os.TempDir(), "tally-pool-*", "owner.pid"))
	for _, f := range owners {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(string(b))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			continue
		}
		_ = stop(filepath.Dir(f))
	}
}
