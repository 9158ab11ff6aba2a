package main

import (
	"fmt"
	"math"
	"runtime/metrics"
	"sync"
	"time"
)

// exportMemory is the bench process's memory during an export. The
// process holds the router, the regional service and the load generator
// at the GOGC of runtimex.TuneGC (400): its resident set may grow to five
// times the heap that is live before a collection, so the peak above idle
// says what the collector let grow, not what the export holds. The live
// heap (what the latest collection marked) above idle is what the export
// held; the heap's objects are those live and not yet collected.
type exportMemory struct {
	idleRSS, peakRSS   int64
	idleLive, peakLive int64 // /gc/heap/live:bytes
	peakObjects        int64 // /memory/classes/heap/objects:bytes
	gcs                int64 // collections during the export
	gogc               int64 // the process's GOGC, percent
	memLimit           int64 // its soft memory limit (math.MaxInt64 for none)
}

var memMetrics = []string{"/gc/heap/live:bytes", "/memory/classes/heap/objects:bytes", "/gc/cycles/total:gc-cycles",
	"/gc/gogc:percent", "/gc/gomemlimit:bytes"}

// readMem is memMetrics' values now, in their order.
func readMem() [5]int64 {
	s := make([]metrics.Sample, len(memMetrics))
	for i, name := range memMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	var out [5]int64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			out[i] = int64(s[i].Value.Uint64())
		}
	}
	return out
}

// sampleExportMemory starts sampling every 5 ms from the idle levels now;
// the function it answers stops it (once; again, it answers the same) and
// answers the figures.
func sampleExportMemory() func() exportMemory {
	m0 := readMem()
	m := exportMemory{idleRSS: rss(), idleLive: m0[0], gogc: m0[3], memLimit: m0[4]}
	m.peakRSS, m.peakLive, m.peakObjects = m.idleRSS, m.idleLive, m0[1]
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				v := readMem()
				m.peakRSS, m.peakLive, m.peakObjects = max(m.peakRSS, rss()), max(m.peakLive, v[0]), max(m.peakObjects, v[1])
			}
		}
	}()
	var once sync.Once
	return func() exportMemory {
		once.Do(func() {
			close(stop)
			<-done
			m.gcs = readMem()[2] - m0[2]
		})
		return m
	}
}

// heapCells are a report's measure and figure of the Go heap.
func (m exportMemory) heapCells() string {
	limit := "none"
	if m.memLimit > 0 && m.memLimit < math.MaxInt64 {
		limit = fmt.Sprintf("%.0f MB", float64(m.memLimit)/1e6)
	}
	return fmt.Sprintf("Go heap: live idle, peak live (above idle); peak of its objects, live and not yet collected; collections "+
		"(GOGC %d, soft limit %s) | %.0f MB, %.0f MB (%.0f MB); %.0f MB; %d", m.gogc, limit, float64(m.idleLive)/1e6,
		float64(m.peakLive)/1e6, float64(m.peakLive-m.idleLive)/1e6, float64(m.peakObjects)/1e6, m.gcs)
}

// exportMemoryMeaning is what a report's memory figures say.
const exportMemoryMeaning = "Memory is the process's (router, regional service and bench together), sampled every 5 ms: its " +
	"resident set above its level just before the request, after a collection, and its Go heap (runtime/metrics): the live " +
	"heap, as the latest collection marked it, above idle is what the export held; the resident set also holds what the " +
	"collector lets grow before it runs, up to (1 + GOGC/100) times the live heap, which the process's soft memory limit " +
	"(`runtimex.TuneGC`, nine tenths of a container's) caps in production and the bench's machine may not."
