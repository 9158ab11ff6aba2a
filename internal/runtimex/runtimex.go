// Package runtimex holds the Go runtime settings every Tally process starts with.
package runtimex

import (
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// GCPercent is the garbage collector's target when GOGC is not set. The
// services keep small live heaps and allocate per request, so at Go's default
// of 100 they collect many times a second under load, which shows in tail
// latency; 400 trades a few megabytes for a quarter of the cycles.
const GCPercent = 400

// TuneGC applies GCPercent unless the operator chose with GOGC, and, unless
// GOMEMLIMIT is set, a soft memory limit of nine tenths of the container's.
// At 400 a heap grows to five times what is live before it is collected:
// a process with 200 MB live would pass 1 GB (the regional instance's
// limit in deploy/base) and be killed, and an export of 10,000,000 rows
// peaked 242 MB above idle in the bench's process where, at GOGC 100, one
// of 1,000,000 peaked 27 MB above it. The limit makes the collector run
// earlier only as the container's memory runs out.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(GCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		if n, ok := MemoryLimit(os.DirFS("/")); ok {
			debug.SetMemoryLimit(n / 10 * 9)
		}
	}
}

// MemoryLimit is the memory limit of the cgroup the process runs in (v2's
// memory.max, else v1's memory.limit_in_bytes) read from root, and false
// when there is none.
func MemoryLimit(root fs.FS) (int64, bool) {
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := fs.ReadFile(root, p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		// "max" (v2) and a page-rounded 2^63 (v1) say unlimited.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
