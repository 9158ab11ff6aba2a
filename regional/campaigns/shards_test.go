package campaigns

import "testing"

// The counter rows' shards are dealt in turn: sixteen writers under way
// at once in an instance each hold a shard of their own (drawn at random,
// sixteen nearly always pair two, whose second waits for the first's
// commit).
func TestShardsAreDealtInTurn(t *testing.T) {
	for range 3 {
		seen := map[int16]bool{}
		for range voucherCountShards {
			s := nextShard()
			if s < 0 || s >= voucherCountShards || seen[s] {
				t.Fatalf("shard %d dealt twice or out of range in %d turns: %v", s, voucherCountShards, seen)
			}
			seen[s] = true
		}
	}
}
