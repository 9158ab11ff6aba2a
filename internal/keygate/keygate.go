// Package keygate keeps two batches that run at once from holding items
// of the same key: an item whose key a running batch holds waits, and
// joins the batch that starts when that batch ends. The outbox worker
// uses it (regional/async: a key is the rows a task locks), so that its
// batch transactions never wait on each other's row locks.
package keygate

import "sync"

// Gate admits items to batches. Key is an item's key ("" for an item never
// held back); ID tells items apart while they are admitted (an item's key
// is worked out once, when it is first seen). The zero Gate with Key and
// ID set is ready.
type Gate[T any, ID comparable] struct {
	Key func(T) string
	ID  func(T) ID

	mu      sync.Mutex
	held    map[string]int // keys of the running batches: items holding each
	waiting []T            // held back, in the order admitted
	keys    map[ID]string
}

// keyOf is t's key, worked out once while t is admitted; with g.mu held.
func (g *Gate[T, ID]) keyOf(t T) string {
	id := g.ID(t)
	if key, ok := g.keys[id]; ok {
		return key
	}
	key := g.Key(t)
	g.keys[id] = key
	return key
}

// Admit returns the items of ts that may run now, as one batch, and keeps
// the others back: those whose key a running batch holds, or an item
// already waiting holds (so each key's items keep their order).
func (g *Gate[T, ID]) Admit(ts []T) []T {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held, g.keys = map[string]int{}, map[ID]string{}
	}
	waitingKeys := map[string]bool{}
	for _, t := range g.waiting {
		waitingKeys[g.keyOf(t)] = true
	}
	var run []T
	for _, t := range ts {
		key := g.keyOf(t)
		if key != "" && (g.held[key] > 0 || waitingKeys[key]) {
			g.waiting = append(g.waiting, t)
			waitingKeys[key] = true
			continue
		}
		run = append(run, t)
	}
	g.hold(run)
	return run
}

// hold marks the keys of a batch about to run; with g.mu held.
func (g *Gate[T, ID]) hold(ts []T) {
	for _, t := range ts {
		if key := g.keyOf(t); key != "" {
			g.held[key]++
		}
	}
}

// Done releases the keys of a batch that has ended and returns, as the
// next batch (its keys held), every waiting item whose key no running
// batch holds now.
func (g *Gate[T, ID]) Done(ts []T) []T {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range ts {
		if key := g.keyOf(t); key != "" {
			if g.held[key]--; g.held[key] <= 0 {
				delete(g.held, key)
			}
		}
		delete(g.keys, g.ID(t))
	}
	var run, keep []T
	for _, t := range g.waiting {
		if g.held[g.keyOf(t)] > 0 {
			keep = append(keep, t)
		} else {
			run = append(run, t)
		}
	}
	g.waiting = keep
	g.hold(run)
	return run
}
