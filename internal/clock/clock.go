// Package clock is the time that time-driven behaviour (points expiring,
// pending points activating) reads: the wall clock, which tests may move
// forward. A nil *Clock is the wall clock.
package clock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tallyhq/tally/internal/runtimex"
)

// Clock is the wall clock plus an offset tests set.
type Clock struct{ offset atomic.Int64 }

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

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// Every runs each fn in turn every interval until ctx ends, handing their
// errors to log (none once ctx has ended): the loop of the sweeps that do
// time-driven work.
func Every(ctx context.Context, interval time.Duration, log func(error), fns ...func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, fn := range fns {
				// A panicking sweep is this round's error; the next runs.
				if err := runtimex.Call(func() error { return fn(ctx) }); err != nil && ctx.Err() == nil {
					log(err)
				}
			}
		}
	}
}
