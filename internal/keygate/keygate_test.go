package keygate

import (
	"slices"
	"strings"
	"testing"
)

// An item is "id:key"; its key "" is never held back.
func gate() *Gate[string, string] {
	return &Gate[string, string]{
		Key: func(s string) string { _, k, _ := strings.Cut(s, ":"); return k },
		ID:  func(s string) string { id, _, _ := strings.Cut(s, ":"); return id },
	}
}

func TestAKeyHeldByARunningBatchWaitsForItsEndInOrder(t *testing.T) {
	g := gate()
	first := g.Admit([]string{"1:a", "2:b", "3:"})
	if want := []string{"1:a", "2:b", "3:"}; !slices.Equal(first, want) {
		t.Fatalf("first batch %v, want %v", first, want)
	}
	// a and b are held: their items wait; c and keyless ones run; a later
	// item of a waits behind the waiting one, so a's items keep their order.
	second := g.Admit([]string{"4:a", "5:c", "6:", "7:b"})
	if want := []string{"5:c", "6:"}; !slices.Equal(second, want) {
		t.Fatalf("second batch %v, want %v", second, want)
	}
	if third := g.Admit([]string{"8:a"}); len(third) != 0 {
		t.Fatalf("an item of a key with one waiting ran at once: %v", third)
	}
	// The first batch ends: a's and b's waiting items are the next batch.
	if next, want := g.Done(first), []string{"4:a", "7:b", "8:a"}; !slices.Equal(next, want) {
		t.Fatalf("after the first batch %v, want %v", next, want)
	}
	// a is held again by that batch, c no longer once its batch ended.
	g.Done(second)
	if run := g.Admit([]string{"9:a", "10:c"}); !slices.Equal(run, []string{"10:c"}) {
		t.Fatalf("admitted %v, want only 10:c", run)
	}
}
