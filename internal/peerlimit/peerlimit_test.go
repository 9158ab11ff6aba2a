package peerlimit

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"
)

// startRing starts n replicas on loopback ports, each knowing all. Checks wait
// on their owner up to deadline: more than production's 20 ms where a
// test counts on every check reaching its owner, the race detector
// making a loaded machine's calls slower.
func startRing(t *testing.T, n int, deadline time.Duration) []*Limiter {
	t.Helper()
	ls := make([]*Limiter, n)
	var addrs []string
	for i := range ls {
		l, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", Deadline: deadline})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		ls[i] = l
		addrs = append(addrs, l.Addr())
	}
	for _, l := range ls {
		l.SetPeers(addrs)
	}
	return ls
}

var client = Bucket{Name: "client", Rate: 5, Per: 5 * time.Second, Burst: 5}

// roundRobin sends count checks of key, one replica after the other, and
// returns how many were allowed.
func roundRobin(ls []*Limiter, key string, count int) int {
	ok := 0
	for i := range count {
		if ls[i%len(ls)].Take(context.Background(), client, key, 1).Allowed {
			ok++
		}
	}
	return ok
}

// Three replicas, one address round-robin across them: the burst, not
// three bursts (each replica keeping its own bucket let 15 through).
func TestOneAddressOverThreeReplicasGetsOneLimit(t *testing.T) {
	ls := startRing(t, 3, time.Second)
	for _, l := range ls {
		if got := len(l.Peers()); got != 3 {
			t.Fatalf("ring of %d", got)
		}
	}
	start := time.Now()
	got := roundRobin(ls, "p1|203.0.113.7", 30)
	// The bucket refills one a second: what the time taken allows on top.
	if slack := int(time.Since(start).Seconds()); got > 5+slack || got < 5 {
		t.Fatalf("%d of 30 allowed over three replicas, want 5 (+%d refilled)", got, slack)
	}
	for i, l := range ls {
		if n := l.FailedOpen("client"); n != 0 {
			t.Fatalf("replica %d failed open %v times with every peer up", i, n)
		}
	}
	// Another address has a bucket of its own.
	if got := roundRobin(ls, "p1|203.0.113.8", 5); got != 5 {
		t.Fatalf("another address: %d of 5", got)
	}
	// Hits given back (a negative take) can be taken again, up to the burst.
	// Refilled one a minute: a loaded machine's pauses between the takes
	// (one a tenth of a second refilled a token once) refill nothing.
	lookups := Bucket{Name: "lookups", Rate: 3, Per: 3 * time.Minute, Burst: 3}
	for i := range 3 {
		if !ls[i].Take(context.Background(), lookups, "a", 1).Allowed {
			t.Fatalf("lookup %d refused", i)
		}
	}
	if ls[0].Take(context.Background(), lookups, "a", 1).Allowed {
		t.Fatal("a fourth lookup within the burst's time was allowed")
	}
	ls[1].Take(context.Background(), lookups, "a", -1)
	if !ls[2].Take(context.Background(), lookups, "a", 1).Allowed {
		t.Fatal("a lookup given back on one replica was not there on another")
	}
}

// A replica leaves mid-window (discovery drops it from the others' ring):
// the others keep limiting every address. The addresses it owned start
// afresh on their new owner: at most one more burst, once.
func TestAReplicaLeavingMovesOnlyItsCounters(t *testing.T) {
	ls := startRing(t, 3, time.Second)
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = fmt.Sprintf("p1|198.51.100.%d", i)
		if got := roundRobin(ls, keys[i], 9); got != 5 && got != 6 { // 6: a token refilled meanwhile
			t.Fatalf("%s: %d of 9 before the replica left", keys[i], got)
		}
	}
	gone := ls[2]
	gone.Close()
	rest := ls[:2]
	for _, l := range rest {
		l.SetPeers([]string{rest[0].Addr(), rest[1].Addr()})
	}
	moved := 0
	for _, k := range keys {
		got := roundRobin(rest, k, 9)
		switch got {
		case 0, 1, 2: // kept by its owner: spent (a token or two may have come back)
		case 5, 6, 7: // owned by the replica that left: a fresh bucket
			moved++
		default:
			t.Fatalf("%s: %d of 9 after the replica left", k, got)
		}
		// Either way, limited from then on.
		if got := roundRobin(rest, k, 6); got > 2 {
			t.Fatalf("%s: %d of 6 more after its counter was re-created", k, got)
		}
	}
	// About a third of the addresses were the replica's; none of the
	// others moved (consistent hashing).
	if moved == 0 || moved > 20 {
		t.Fatalf("%d of 30 addresses started afresh", moved)
	}
	for _, l := range rest {
		if n := l.FailedOpen("client"); n != 0 {
			t.Fatalf("failed open %v times once the ring had settled", n)
		}
	}
}

// A replica cut off from its peers (its listener stopped, still in the
// others' ring): checks of the addresses it owns are answered within the
// deadline on each asking replica's share, and counted.
func TestAnUnreachableOwnerFailsOpenOnTheShareWithinTheDeadline(t *testing.T) {
	ls := startRing(t, 3, 20*time.Millisecond)
	cut := ls[2]
	cut.srv.Stop() // the port closed; the replica is still named in the ring
	// Addresses the cut replica owns, found by asking it: the owner is
	// recorded on a forwarded check's answer, so ask the others instead and
	// keep the addresses they could not get an answer for.
	var owned []string
	for i := 0; len(owned) < 5 && i < 200; i++ {
		k := fmt.Sprintf("p1|192.0.2.%d", i)
		if p, _ := ls[0].inst.GetPeer(context.Background(), client.Name+"_"+k); p.Info().GRPCAddress == cut.Addr() {
			owned = append(owned, k)
		}
	}
	if len(owned) < 5 {
		t.Fatalf("found %d addresses owned by the cut replica", len(owned))
	}
	before := ls[0].FailedOpen("client") + ls[1].FailedOpen("client")
	for _, k := range owned {
		allowed := 0
		for i := range 10 {
			l := ls[i%2]
			start := time.Now()
			r := l.Take(context.Background(), client, k, 1)
			if took := time.Since(start); took > l.cfg.Deadline+30*time.Millisecond {
				t.Fatalf("a check waited %v on an unreachable owner (deadline %v)", took, l.cfg.Deadline)
			}
			if !r.FailedOpen {
				t.Fatalf("%s: answered as if the owner had been reached", k)
			}
			if r.Allowed {
				allowed++
			}
		}
		// Each of the two asking replicas has a share of ceil(5/3) = 2.
		if allowed != 4 {
			t.Fatalf("%s: %d of 10 allowed on the two replicas' shares, want 2 each", k, allowed)
		}
	}
	if after := ls[0].FailedOpen("client") + ls[1].FailedOpen("client"); after-before != float64(10*len(owned)) {
		t.Fatalf("fail-open counted %v, want %d", after-before, 10*len(owned))
	}
}

// A ring from DNS: every address the name resolves to, on the port given,
// and this replica; looked up again as the interval passes.
func TestDNSDiscoveryFindsThePeersOfTheName(t *testing.T) {
	first, err := Start(context.Background(), Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, port, _ := net.SplitHostPort(first.Addr())
	l, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", DNS: "localhost:" + port, DNSInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if ps := l.Peers(); !slices.Contains(ps, first.Addr()) || !slices.Contains(ps, l.Addr()) {
		t.Fatalf("the ring from DNS: %v, want %s and %s", ps, first.Addr(), l.Addr())
	}
}
