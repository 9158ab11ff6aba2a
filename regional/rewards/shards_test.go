package rewards

import "testing"

// A reward's count shards are dealt in turn, as campaigns' are: sixteen
// redemptions under way at once in an instance each hold a shard of their
// own.
func TestShardsAreDealtInTurn(t *testing.T) {
	seen := map[int16]bool{}
	for range countShards {
		s := nextShard()
		if s < 0 || s >= countShards || seen[s] {
			t.Fatalf("shard %d dealt twice or out of range in %d turns: %v", s, countShards, seen)
		}
		seen[s] = true
	}
}
