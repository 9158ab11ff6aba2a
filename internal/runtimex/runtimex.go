// Package runtimex holds the Go runtime settings every Tally process starts with.
package runtimex

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target when GOGC is not set. The
// services keep small live heaps and allocate per request, so at Go's default
// of 100 they collect many times a second under load, which shows in tail
// latency; 400 trades a few megabytes for a quarter of the cycles.
const GCPercent = 400

// TuneGC applies GCPercent unless the operator chose with GOGC.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(GCPercent)
	}
}
