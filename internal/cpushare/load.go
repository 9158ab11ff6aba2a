package cpushare

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CPULoad reads how busy the CPU available to this process is, since the
// last reading: in a cgroup (v2) with a CPU quota, as in a Kubernetes pod
// with a CPU limit, the cgroup's use of its quota; otherwise the
// machine's, from /proc/stat (the database and router on the same machine
// count, as they take the same CPUs). Where neither can be read, it says
// ok false and the governor paces no one.
func CPULoad() func() (float64, bool) {
	if quota, ok := cgroupQuota(); ok {
		return sampler(func() (busy, total float64, ok bool) {
			usec, ok := cgroupUsage()
			// total is wall time × the CPUs the quota grants; busy the
			// cgroup's CPU time, both in µs.
			return usec, float64(time.Now().UnixMicro()) * quota, ok
		})
	}
	return sampler(procStat)
}

// sampler turns cumulative (busy, total) readings into the utilisation
// between two calls.
func sampler(read func() (busy, total float64, ok bool)) func() (float64, bool) {
	var mu sync.Mutex
	var lastBusy, lastTotal float64
	var have bool
	return func() (float64, bool) {
		mu.Lock()
		defer mu.Unlock()
		busy, total, ok := read()
		if !ok {
			have = false
			return 0, false
		}
		defer func() { lastBusy, lastTotal, have = busy, total, true }()
		if !have || total <= lastTotal {
			return 0, false
		}
		return min(1, max(0, (busy-lastBusy)/(total-lastTotal))), true
	}
}

// procStat reads the machine's CPU time from the first line of /proc/stat:
// user nice system idle iowait irq softirq steal (guest time is already in
// user's); idle and iowait are not busy.
func procStat() (busy, total float64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, false
	}
	var v [8]float64
	for i := range v {
		n, err := strconv.ParseFloat(fields[i+1], 64)
		if err != nil {
			return 0, 0, false
		}
		v[i] = n
		total += n
	}
	return total - v[3] - v[4], total, true
}

const cgroupDir = "/sys/fs/cgroup/"

// cgroupQuota is the CPUs the process's cgroup (v2) may use, from cpu.max
// ("max 100000" is no quota).
func cgroupQuota() (float64, bool) {
	b, err := os.ReadFile(cgroupDir + "cpu.max")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	q, err1 := strconv.ParseFloat(f[0], 64)
	p, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return min(q/p, float64(runtime.NumCPU())), true
}

// cgroupUsage is the cgroup's CPU time so far, µs (cpu.stat usage_usec).
func cgroupUsage() (float64, bool) {
	b, err := os.ReadFile(cgroupDir + "cpu.stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("usage_usec ")); ok {
			n, err := strconv.ParseFloat(string(v), 64)
			return n, err == nil
		}
	}
	return 0, false
}
