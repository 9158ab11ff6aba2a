//go:build race

package stacktest

// RaceEnabled says the race detector is on: it multiplies the CPU a
// request costs several times, so tests that compare latencies assert them
// only without it (make test runs them once more so).
const RaceEnabled = true
