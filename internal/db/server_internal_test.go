package db

import (
	"strings"
	"testing"
)

// A CockroachDB below the minimum, or one whose patch lacks the SKIP
// LOCKED fix, or with READ COMMITTED off, is refused with what to change.
func TestCheckCockroach(t *testing.T) {
	for _, c := range []struct {
		version, rc string
		refused     string
	}{
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
			err := checkCockroach(c.version, c.rc)
			if (c.refused == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.refused)) {
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
