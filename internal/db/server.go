package db

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// MinCockroach is the oldest CockroachDB Tally runs on: READ COMMITTED,
// which the lock-first writes run at (docs/architecture.md, Database
// rules), is GA from v24.1 (before, or with the setting off, such a
// transaction silently runs SERIALIZABLE), and FOR UPDATE SKIP LOCKED with
// LIMIT under READ COMMITTED, which the outbox claim and publications use,
// returned wrong rows before v24.1.5 and v24.2.3 (cockroach#127718).
var MinCockroach = [3]int{24, 1, 5}

// cockroachFixed are the first patch releases of each minor that carry the
// SKIP LOCKED fix, past MinCockroach's own minor.
var cockroachFixed = map[[2]int]int{{24, 2}: 3}

var cockroachVersion = regexp.MustCompile(`CockroachDB \S+ v(\d+)\.(\d+)\.(\d+)`)

// ErrServerRefused is what CheckServer fails with for a CockroachDB that
// Tally does not run on: too old, or with READ COMMITTED off. The error
// says what to change.
var ErrServerRefused = errors.New("db: this database server is refused")

// CheckServer reads what the server at q is: on PostgreSQL nothing more is
// asked; on CockroachDB the version must be MinCockroach or later (with the
// SKIP LOCKED fix) and READ COMMITTED enabled, else the error
// (ErrServerRefused) says what to change. Every CockroachDB Tally connects
// to is held to it, the directory's too: one supported minimum for a
// deployment.
func CheckServer(ctx context.Context, q Querier) error {
	var version string
	if err := q.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		return err
	}
	if p, ok := q.(*Pool); ok {
		p.dialect.Store(int32(dialectOf(version)))
	}
	if dialectOf(version) != CockroachDB {
		return nil
	}
	var enabled any // a BOOL
	if err := q.QueryRow(ctx, `SHOW CLUSTER SETTING sql.txn.read_committed_isolation.enabled`).Scan(&enabled); err != nil {
		return fmt.Errorf("db: read the CockroachDB setting sql.txn.read_committed_isolation.enabled: %w", err)
	}
	return JudgeServer(version, fmt.Sprint(enabled))
}

// JudgeServer is CheckServer's decision, from what the server answered:
// its version() and, on CockroachDB, its READ COMMITTED setting ("true"
// when on). nil for PostgreSQL.
func JudgeServer(version, readCommitted string) error {
	if dialectOf(version) != CockroachDB {
		return nil
	}
	return checkCockroach(version, readCommitted)
}

// checkCockroach judges a CockroachDB server by its version() and its READ
// COMMITTED setting.
func checkCockroach(version, readCommitted string) error {
	m := cockroachVersion.FindStringSubmatch(version)
	if m == nil {
		return fmt.Errorf("%w: cannot read the CockroachDB version in %q", ErrServerRefused, version)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	fixed, ok := cockroachFixed[[2]int{v[0], v[1]}]
	old := v[0] < MinCockroach[0] || (v[0] == MinCockroach[0] && v[1] < MinCockroach[1]) ||
		(v[0] == MinCockroach[0] && v[1] == MinCockroach[1] && v[2] < MinCockroach[2]) || (ok && v[2] < fixed)
	if old {
		return fmt.Errorf("%w: CockroachDB v%d.%d.%d is too old: Tally needs v%d.%d.%d or later (v24.2.3 or later in v24.2): "+
			"READ COMMITTED is GA from v24.1, and FOR UPDATE SKIP LOCKED with LIMIT returned wrong rows before those patches (cockroach#127718)",
			ErrServerRefused, v[0], v[1], v[2], MinCockroach[0], MinCockroach[1], MinCockroach[2])
	}
	if readCommitted != "true" {
		return fmt.Errorf("%w: CockroachDB's READ COMMITTED is off: run SET CLUSTER SETTING sql.txn.read_committed_isolation.enabled = true; "+
			"without it the writes Tally runs at READ COMMITTED run SERIALIZABLE and fail under contention", ErrServerRefused)
	}
	return nil
}

// ServerGate is CheckServer at a service's start and, when the database
// could not be reached then, in its readiness: a service whose database
// was down at start does not serve a server it would have refused.
type ServerGate struct {
	q    Querier
	name string

	PassGate
}

// NewServerGate checks the server behind q, called name in messages ("the
// cluster's database").
func NewServerGate(q Querier, name string) *ServerGate { return &ServerGate{q: q, name: name} }

// Start checks the server at a service's start, waiting at most wait for
// it: nil when it passed, or could not be reached in time (Check, in the
// service's readiness, then checks it); its refusal, which the service
// must not start with, otherwise.
func (g *ServerGate) Start(ctx context.Context, wait time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := g.Check(cctx)
	if err == nil || errors.Is(Classify(err), ErrUnavailable) || (cctx.Err() != nil && ctx.Err() == nil) {
		return nil
	}
	return err
}

// Check is nil once the server passed CheckServer; its refusal
// (ErrServerRefused, remembered for 5 s, as a setting may be turned on
// meanwhile) while it is refused; the database's error when it cannot be
// asked.
func (g *ServerGate) Check(ctx context.Context) error {
	return g.Ask(5*time.Second, func() (error, error) {
		err := CheckServer(ctx, g.q)
		switch {
		case err == nil:
			return nil, nil
		case errors.Is(err, ErrServerRefused):
			return fmt.Errorf("%s: %w", g.name, err), nil
		}
		return nil, fmt.Errorf("%s: %w", g.name, err)
	})
}
