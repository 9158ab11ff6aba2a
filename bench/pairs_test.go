package main

import (
	"math"
	"slices"
	"testing"
)

func TestEveryPassRunsEveryPathWithThePairsBackToBack(t *testing.T) {
	firsts := map[int]int{}
	type placed struct{ path, place int } // a pair's first path, and the pair's place in the pass
	balance := map[placed]int{}
	for p := range satPasses {
		order := passOrder(p)
		if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("pass %d runs %v", p, order)
		}
		for _, pair := range [][2]int{{1, 2}, {3, 4}} {
			i, j := slices.Index(order, pair[0]), slices.Index(order, pair[1])
			if i-j != 1 && j-i != 1 {
				t.Fatalf("pass %d: %v apart in %v", p, pair, order)
			}
			first := pair[1]
			if i < j {
				first = pair[0]
			}
			firsts[first]++
			balance[placed{first, min(i, j)}]++
		}
	}
	// ABBA: each path of a pair runs first in half the passes.
	for _, path := range []int{1, 2, 3, 4} {
		if firsts[path] != satPasses/2 {
			t.Fatalf("path %d ran first in %d of %d passes", path, firsts[path], satPasses)
		}
	}
	// And wherever in a pass a pair runs, each of its paths runs first
	// there as often as the other: no place in the pass leans one way.
	for k, n := range balance {
		other := placed{map[int]int{1: 2, 2: 1, 3: 4, 4: 3}[k.path], k.place}
		if balance[other] != n {
			t.Fatalf("path %d first at place %d in %d passes, its pair's other path in %d", k.path, k.place, n, balance[other])
		}
	}
}

func TestPairedRatiosMedianAndInterval(t *testing.T) {
	a := []float64{90, 100, 80, 95, 85, 100, 70, 99, 91, 93}
	b := []float64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}
	r := pairedRatios(a, b)
	if math.Abs(r.median-0.92) > 1e-9 { // (0.91+0.93)/2
		t.Fatalf("median %v", r.median)
	}
	// n = 10: (x(3), x(8)) covers the median with 1 − 2·56/1024.
	if r.low != 0.85 || r.high != 0.99 || math.Abs(r.coverage-(1-112.0/1024)) > 1e-9 {
		t.Fatalf("interval %v–%v at %v", r.low, r.high, r.coverage)
	}
	if c := medianCoverage(5, 1); math.Abs(c-(1-2.0/32)) > 1e-9 {
		t.Fatalf("coverage(5, 1) = %v", c)
	}
}
