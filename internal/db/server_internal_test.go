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
