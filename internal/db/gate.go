package db

import (
	"sync"
	"sync/atomic"
	"time"
)

// PassGate is what ServerGate and dbschema.Gate share: a check of the
// database that, once passed, holds without asking again (readiness is
// asked every few seconds); whose refusal is remembered for a while, so
// that a probe does not query a database it was just refused by; and whose
// other errors (the database not answering) are not remembered, so the
// next call asks again.
type PassGate struct {
	good atomic.Bool
	mu   sync.Mutex
	last error // the last refusal, until next
	next time.Time
}

// Ask answers from the gate when it has passed or remembers a refusal,
// and otherwise asks: a refusal it returns is remembered for every, an
// error is returned as it is, and neither is a pass.
func (g *PassGate) Ask(every time.Duration, ask func() (refusal, err error)) error {
	if g.good.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.good.Load() {
		return nil
	}
	if g.last != nil && time.Now().Before(g.next) {
		return g.last
	}
	refusal, err := ask()
	switch {
	case err != nil:
		return err
	case refusal != nil:
		g.last, g.next = refusal, time.Now().Add(every)
		return refusal
	}
	g.good.Store(true)
	g.last = nil
	return nil
}

// Passed says whether the gate's check has passed.
func (g *PassGate) Passed() bool { return g.good.Load() }
