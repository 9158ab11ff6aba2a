package cpushare

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// load drives a governor's model by hand: what each project was served
// and what it cost, then a tick with a made-up utilisation. (Admit's
// waiting, in real time, is tested on its own below.)
type load struct {
	t *testing.T
	g *Governor
}

func newLoad(t *testing.T, opts Options) *load {
	opts.Load = func() (float64, bool) { return 0, false } // Tick is called by hand
	if opts.Room == 0 {
		opts.Room = 1 // one CPU: A's 0.5 busy-seconds a second is over its quarter
	}
	return &load{t: t, g: New(opts)}
}

// serve counts n requests of project, each costing cost.
func (l *load) serve(project string, share float64, n int, cost time.Duration) {
	t := l.g.tenant(project, share)
	t.n.Add(int64(n))
	t.cost.Add(int64(n) * int64(cost))
}

// ticks runs k ticks of 100 ms in which A sends a requests of 5 ms and B
// b requests of 1 ms, the CPU at u, each on a plan of a quarter.
func (l *load) ticks(k int, u float64, a, b int) { l.ticksOf(k, u, true, 0.25, a, b) }

// ticksOf is ticks with A on a plan of aShare, and the CPU's load read
// (known) or not.
func (l *load) ticksOf(k int, u float64, known bool, aShare float64, a, b int) {
	for range k {
		if a > 0 {
			l.serve("A", aShare, a, 5*time.Millisecond)
		}
		if b > 0 {
			l.serve("B", 0.25, b, time.Millisecond)
		}
		l.g.Tick(u, known)
	}
}

func TestABusyInstancePacesTheProjectOverItsShareOnly(t *testing.T) {
	l := newLoad(t, Options{Target: 0.65, Floor: 1})
	// A costs 50 busy-ms a tick (0.5 s a second), B 5: both active, the
	// CPU at 90 %.
	l.ticks(5, 0.9, 10, 5)
	a := l.g.Paced("A")
	if a == 0 {
		t.Fatal("A, over its part of a busy instance, is not paced")
	}
	if b := l.g.Paced("B"); b != 0 {
		t.Fatalf("B, within its part, is paced to %.1f/s", b)
	}
	// Each busy tick lowers A's pace, by 15 % at most.
	l.ticks(1, 0.9, 10, 5)
	if a2 := l.g.Paced("A"); a2 >= a || a2 < 0.85*a-0.01 {
		t.Fatalf("A's pace went from %.1f to %.1f on a busy tick", a, a2)
	}
}

func TestPacingIsWorkConserving(t *testing.T) {
	t.Run("a project within its part of what the projects cost is not paced", func(t *testing.T) {
		// A costs 50 busy-ms a tick, B 40: B is under half of the 90 and
		// is not the one to slow, however busy the CPU; A is.
		l := newLoad(t, Options{Target: 0.65})
		l.ticks(20, 1, 10, 40)
		if b := l.g.Paced("B"); b != 0 {
			t.Fatalf("B, within its part of the projects' cost, paced to %.1f/s", b)
		}
		if l.g.Paced("A") == 0 {
			t.Fatal("A, over its part, is not paced")
		}
	})
	t.Run("a project within its share of the instance is not paced", func(t *testing.T) {
		// A costs 0.2 busy-seconds a second on a plan of a quarter of an
		// instance of one CPU: what its plan gives it, however busy the
		// CPU and however light B.
		l := newLoad(t, Options{Target: 0.65})
		l.ticks(20, 1, 4, 5)
		if a := l.g.Paced("A"); a != 0 {
			t.Fatalf("A, within its share of the instance, paced to %.1f/s", a)
		}
	})
	t.Run("an instance that is not busy paces no one", func(t *testing.T) {
		l := newLoad(t, Options{Target: 0.65})
		l.ticks(20, 0.6, 10, 5)
		if a := l.g.Paced("A"); a != 0 {
			t.Fatalf("A paced to %.1f/s at 60 %% CPU", a)
		}
	})
	t.Run("a project alone is not paced", func(t *testing.T) {
		l := newLoad(t, Options{Target: 0.65})
		l.ticks(20, 1, 10, 0)
		if a := l.g.Paced("A"); a != 0 {
			t.Fatalf("A, alone, paced to %.1f/s", a)
		}
	})
	t.Run("a project whose plan gives it the whole instance is not paced", func(t *testing.T) {
		l := newLoad(t, Options{Target: 0.65})
		l.ticksOf(20, 1, true, 1, 10, 5)
		if a := l.g.Paced("A"); a != 0 {
			t.Fatalf("A, on a whole-instance plan, paced to %.1f/s", a)
		}
	})
	t.Run("the pace is lifted when the other project goes quiet", func(t *testing.T) {
		l := newLoad(t, Options{Target: 0.65})
		l.ticks(5, 0.9, 10, 5)
		if l.g.Paced("A") == 0 {
			t.Fatal("A not paced")
		}
		l.ticks(11, 0.9, 10, 0) // B quiet for a second
		if a := l.g.Paced("A"); a != 0 {
			t.Fatalf("A still paced to %.1f/s with B quiet", a)
		}
	})
	t.Run("the pace rises and is lifted when the CPU is calm", func(t *testing.T) {
		l := newLoad(t, Options{Target: 0.65, Floor: 1})
		l.ticks(5, 0.9, 10, 5)
		a := l.g.Paced("A")
		l.ticks(1, 0.3, 10, 5)
		if a2 := l.g.Paced("A"); a2 <= a {
			t.Fatalf("A's pace went from %.1f to %.1f on a calm tick", a, a2)
		}
		l.ticks(40, 0.3, 10, 5)
		if a := l.g.Paced("A"); a != 0 {
			t.Fatalf("A still paced to %.1f/s after 4 s of calm", a)
		}
	})
	t.Run("a load that cannot be read paces no one", func(t *testing.T) {
		l := newLoad(t, Options{Target: 0.65})
		l.ticksOf(20, 0, false, 0.25, 10, 5)
		if a := l.g.Paced("A"); a != 0 {
			t.Fatalf("A paced to %.1f/s on an unknown load", a)
		}
	})
}

func TestAPacedProjectWaitsItsTurnThenIsRefusedAfterTheLongestWait(t *testing.T) {
	l := newLoad(t, Options{Target: 0.65, Floor: 4, Wait: 300 * time.Millisecond})
	for l.g.Paced("A") == 0 || l.g.Paced("A") > 4 {
		l.ticks(1, 1, 10, 5)
	}
	// Paced to 4 a second, burst 1: of three requests at once, the first
	// is admitted at once, the next after about 250 ms; the third's turn
	// would come after 500 ms, so it waits the longest wait, 300 ms, and is
	// refused.
	ctx := context.Background()
	type answer struct {
		err  error
		took time.Duration
	}
	answers := make(chan answer, 3)
	t0 := time.Now()
	for range 3 {
		go func() {
			done, err := l.g.Admit(ctx, "A", 0.25)
			if err == nil {
				done()
			}
			answers <- answer{err, time.Since(t0)}
		}()
	}
	var took []time.Duration
	var refused []answer
	for range 3 {
		a := <-answers
		if errors.Is(a.err, ErrPaced) {
			refused = append(refused, a)
		} else if a.err != nil {
			t.Fatal(a.err)
		} else {
			took = append(took, a.took)
		}
	}
	slices.Sort(took)
	if len(refused) != 1 || len(took) != 2 {
		t.Fatalf("%d admitted (%v), %d refused: want 2 and 1", len(took), took, len(refused))
	}
	if took[0] > 50*time.Millisecond || took[1] < 200*time.Millisecond || took[1] > 300*time.Millisecond {
		t.Fatalf("admitted after %v: want at once and after about 250 ms", took)
	}
	if r := refused[0].took; r < 280*time.Millisecond || r > 450*time.Millisecond {
		t.Fatalf("refused after %v: a refusal comes after the longest wait, 300 ms", r)
	}
	// B is not paced: admitted at once.
	t2 := time.Now()
	done, err := l.g.Admit(ctx, "B", 0.25)
	if err != nil || time.Since(t2) > 50*time.Millisecond {
		t.Fatalf("B: %v after %v", err, time.Since(t2))
	}
	done()
	// A request that gives up while it waits is not counted as refused.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.g.Admit(cctx, "A", 0.25); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request whose context ends while it waits: %v", err)
	}
}

func TestCPULoadReadsTheMachine(t *testing.T) {
	load := CPULoad()
	load()
	// Busy one CPU for a while.
	end := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(end) {
	}
	u, ok := load()
	if !ok {
		t.Skip("no /proc/stat or cgroup CPU figures here")
	}
	if u <= 0 || u > 1 {
		t.Fatalf("utilisation %v while a CPU was busy", u)
	}
}
