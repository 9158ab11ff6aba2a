// Package clock is the time that time-driven behaviour (points expiring,
// pending points activating) reads: the wall clock, which tests may move
// forward. A nil *Clock is the wall clock.
package clock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyhq/tally/internal/runtimex"
)

// Clock is the wall clock plus an offset tests set.
type Clock struct {
	offset atomic.Int64

	mu       sync.Mutex
	advanced chan struct{} // closed by the next Advance; nil until asked for
}

// Now is the current time in UTC, to the millisecond (what the database
// keeps), moved by the offset.
func (c *Clock) Now() time.Time {
	now := time.Now().UTC()
	if c != nil {
		now = now.Add(time.Duration(c.offset.Load()))
	}
	return now.Truncate(time.Millisecond)
}

// Today is the date of Now, as midnight UTC.
func (c *Clock) Today() time.Time {
	n := c.Now()
	return time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, time.UTC)
}

// Advance moves the clock forward by d, and wakes the sweeps that run by
// it (Clock.Every): what the move made due is done now, not at their next
// tick.
func (c *Clock) Advance(d time.Duration) {
	c.offset.Add(int64(d))
	c.mu.Lock()
	if c.advanced != nil {
		close(c.advanced)
		c.advanced = nil
	}
	c.mu.Unlock()
}

// Advanced is closed when the clock is next moved; nil (never ready) for
// the wall clock.
func (c *Clock) Advanced() <-chan struct{} {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.advanced == nil {
		c.advanced = make(chan struct{})
	}
	return c.advanced
}

// Every runs each fn in turn every interval, and at once whenever c is
// moved forward, until ctx ends, handing their errors to log (none once ctx
// has ended): the loop of the sweeps that do time-driven work. A nil c is
// the wall clock, which is never moved.
func (c *Clock) Every(ctx context.Context, interval time.Duration, log func(error), fns ...func(context.Context) error) {
	every(ctx, interval, log, c.Advanced, fns)
}

// Every runs each fn in turn every interval until ctx ends, handing their
// errors to log (none once ctx has ended).
func Every(ctx context.Context, interval time.Duration, log func(error), fns ...func(context.Context) error) {
	every(ctx, interval, log, nil, fns)
}

// every is Every, also run at once whenever the channel wake returns
// (nil: never) is ready.
func every(ctx context.Context, interval time.Duration, log func(error), wake func() <-chan struct{}, fns []func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var woken <-chan struct{}
		if wake != nil {
			woken = wake()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-woken:
		}
		for _, fn := range fns {
			// A panicking sweep is this round's error; the next runs.
			if err := runtimex.Call(func() error { return fn(ctx) }); err != nil && ctx.Err() == nil {
				log(err)
			}
		}
	}
}
