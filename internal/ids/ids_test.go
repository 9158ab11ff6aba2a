package ids

import (
	"strings"
	"testing"
)

func TestNewIsPrefixedAndStrictlyIncreasing(t *testing.T) {
	prev := New("vtx_")
	for i := 0; i < 100000; i++ {
		id := New("vtx_")
		if !strings.HasPrefix(id, "vtx_") || len(id) != len("vtx_")+22 {
			t.Fatalf("bad id %q", id)
		}
		if id <= prev {
			t.Fatalf("id %q not after %q", id, prev)
		}
		prev = id
	}
}
