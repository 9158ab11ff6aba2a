package db

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
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

// CheckServer reads what the server at q is: on PostgreSQL nothing more is
// asked; on CockroachDB the version must be MinCockroach or later (with the
// SKIP LOCKED fix) and READ COMMITTED enabled, else the error says what to
// change.
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
	return checkCockroach(version, fmt.Sprint(enabled))
}

// checkCockroach judges a CockroachDB server by its version() and its READ
// COMMITTED setting.
func checkCockroach(version, readCommitted string) error {
	m := cockroachVersion.FindStringSubmatch(version)
	if m == nil {
		return fmt.Errorf("db: cannot read the CockroachDB version in %q", version)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	fixed, ok := cockroachFixed[[2]int{v[0], v[1]}]
	old := v[0] < MinCockroach[0] || (v[0] == MinCockroach[0] && v[1] < MinCockroach[1]) ||
		(v[0] == MinCockroach[0] && v[1] == MinCockroach[1] && v[2] < MinCockroach[2]) || (ok && v[2] < fixed)
	if old {
		return fmt.Errorf("db: CockroachDB v%d.%d.%d is too old: Tally needs v%d.%d.%d or later (v24.2.3 or later in v24.2): "+
			"READ COMMITTED is GA from v24.1, and FOR UPDATE SKIP LOCKED with LIMIT returned wrong rows before those patches (cockroach#127718)",
			v[0], v[1], v[2], MinCockroach[0], MinCockroach[1], MinCockroach[2])
	}
	if readCommitted != "true" {
		return fmt.Errorf("db: CockroachDB's READ COMMITTED is off: run SET CLUSTER SETTING sql.txn.read_committed_isolation.enabled = true; " +
			"without it the writes Tally runs at READ COMMITTED run SERIALIZABLE and fail under contention")
	}
	return nil
}
