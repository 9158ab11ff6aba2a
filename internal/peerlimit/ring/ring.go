// Package ring is the contract between the router and the ring of its
// replicas that keeps the per-address limits (internal/peerlimit): the
// buckets, the answers, and what a member of the ring offers.
//
// It is apart from peerlimit, whose gubernator brings gRPC and
// Kubernetes' client with it (some 300 packages, three quarters of a
// router's linked size), so that the router, the development stack and
// every end-to-end test built on them link none of that: only the
// binary (cmd/tally) and the tests of the ring itself start one, and hand
// it down as this package's interfaces.
package ring

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bucket is a token bucket: Burst at once, refilled at Rate per Per.
type Bucket struct {
	Name  string // the limit's name: the counters' namespace and the metric's label
	Rate  int64
	Per   time.Duration
	Burst int64
}

// Result is a check's answer.
type Result struct {
	Allowed    bool
	Remaining  int64
	Reset      time.Time // when the bucket is full again (refused: when the next token comes)
	FailedOpen bool      // decided on this replica's share
}

// Ring is what the router asks of the region's ring: a check of a counter
// at its owner, and the ring's size.
type Ring interface {
	// Take takes hits tokens of key's bucket (a negative hits gives
	// tokens back, up to the burst) at the counter's owner; past the
	// deadline, on this replica's share.
	Take(ctx context.Context, b Bucket, key string, hits int64) Result
	// Size is how many replicas the ring has, at least 1.
	Size() int
	// Collectors are the member's metrics.
	Collectors() []prometheus.Collector
}

// Member is one replica's member of a ring, as a process that starts
// several (the development stack) handles it: where it listens, whom it
// knows, and its end.
type Member interface {
	Ring
	Addr() string
	SetPeers(addrs []string)
	Close()
}

// Start starts a member listening on addr (host:port, port 0 for any),
// asking a peer at most deadline (0: the implementation's default).
type Start func(ctx context.Context, addr string, deadline time.Duration, log *slog.Logger) (Member, error)
