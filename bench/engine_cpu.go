package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// The engine's CPU per request, robustly. One phase a path a run read the
// router's unchanged code at 0.26 to 0.55 ms across four runs (session
// 32): the machine's state moves between runs by more than a change of a
// fifth. So the engine section also runs its three paths in rounds, the
// three one after another in an order that rotates round by round, each
// round's phase under a CPU profile of its own, and reports each tier's
// median round with the spread; and -engine-cpu-ab runs two builds side
// by side in one run, their rounds alternating (ABBA), each build's
// platform under its own process, and reports each path's paired ratio
// new ÷ old with the interval its order statistics give.

var (
	engineCPURounds int    // -engine-cpu-rounds
	engineCPUServe  bool   // -engine-cpu-serve: a side of -engine-cpu-ab
	engineCPUAB     string // -engine-cpu-ab: the old build's bench binary
)

// cpuPaths are the three paths the rounds measure, in their first order.
var cpuPaths = []string{"validation", "redemption", "qualification"}

// cpuRoundPhase is a round's measured phase of a path for a run of
// phases of d: half of it, 1,000 requests at 200/s at the default 10 s.
func cpuRoundPhase(d time.Duration) time.Duration { return max(d/2, time.Second) }

// cpuRoundVouchers is how many vouchers of each stacked campaign a
// round's redemptions take, warm-up included.
func cpuRoundVouchers(d time.Duration) int {
	return int(200*(cpuRoundPhase(d)+3*time.Second)/time.Second) + 100
}

// cpuRounds are the shares of each path's rounds, in round order.
type cpuRounds map[string][]cpuShare

// cpuRound measures round k: each path once, the order rotated by k.
// Validations read the first vouchers (they change nothing); redemptions
// take fresh ones from *redNext on.
func (f *engineFixture) cpuRound(k int, d time.Duration, redNext *int64) (map[string]cpuShare, error) {
	out := map[string]cpuShare{}
	for i := range cpuPaths {
		name := cpuPaths[(i+k)%len(cpuPaths)]
		path, body := "/v1/"+name+"s", f.stack3
		switch name {
		case "validation":
			f.next.Store(0)
		case "redemption":
			f.next.Store(*redNext)
		case "qualification":
			body = f.qualBody
		}
		var errs atomic.Int64
		_, share, err := atRateCPU(200, f.runners(path, body, &errs, 16), cpuRoundPhase(d), "")
		if name == "redemption" {
			*redNext = f.next.Load()
		}
		if err != nil {
			return nil, err
		}
		if n := errs.Load(); n > 0 {
			return nil, fmt.Errorf("engine: CPU round %d: %d errors of %s", k+1, n, path)
		}
		out[name] = share
	}
	return out, nil
}

// cpuRoundsRun runs n rounds, redemptions from redNext on.
func (f *engineFixture) cpuRoundsRun(n int, d time.Duration, redNext int64) (cpuRounds, error) {
	rs := cpuRounds{}
	for k := range n {
		fmt.Fprintf(os.Stderr, "bench: engine: CPU round %d of %d\n", k+1, n)
		round, err := f.cpuRound(k, d, &redNext)
		if err != nil {
			return rs, err
		}
		for name, s := range round {
			rs[name] = append(rs[name], s)
		}
	}
	return rs, nil
}

// spread is the median and the extremes of xs.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(s), s[0], s[len(s)-1])
}

// tiers are the rounds' per-request CPU of one tier.
func (rs cpuRounds) tiers(name string) (regional, router, platform, whole []float64) {
	for _, s := range rs[name] {
		regional, router = append(regional, s.regional), append(router, s.router)
		platform, whole = append(platform, s.service()), append(whole, s.whole())
	}
	return
}

// rows are the report's rows of the rounds.
func (rs cpuRounds) rows() string {
	var b strings.Builder
	for _, name := range cpuPaths {
		if len(rs[name]) == 0 {
			continue
		}
		regional, router, platform, whole := rs.tiers(name)
		fmt.Fprintf(&b, "| CPU per %s, %d rounds of %d requests at 200/s, the three paths in turn (median round; least–most): "+
			"regional service / router / platform / whole process | %s / %s / %s / %s ms |\n", name, len(rs[name]),
			rs[name][0].requests, spread(regional), spread(router), spread(platform), spread(whole))
	}
	return b.String()
}

// serveCPURounds is a side of -engine-cpu-ab: it says "ready" on stdout,
// then runs a round for each "round K" line on stdin and answers its
// shares as one JSON line, until stdin ends.
func (f *engineFixture) serveCPURounds(d time.Duration, redNext int64) error {
	fmt.Println("cpuab ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var k int
		if _, err := fmt.Sscanf(sc.Text(), "round %d", &k); err != nil {
			return fmt.Errorf("engine: -engine-cpu-serve: %q", sc.Text())
		}
		round, err := f.cpuRound(k, d, &redNext)
		if err != nil {
			return err
		}
		out := map[string][4]float64{}
		for name, s := range round {
			out[name] = [4]float64{s.regional, s.router, s.other, float64(s.requests)}
		}
		b, _ := json.Marshal(out)
		fmt.Printf("cpuab %s\n", b)
	}
	return sc.Err()
}

// abSide is one build's bench process serving rounds.
type abSide struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
}

// startSide starts bin as a side, its logs to stderr prefixed by nothing
// (they say "bench: engine: …" as any run's).
func startSide(name, bin string, d time.Duration, rounds int, outPath string) (*abSide, error) {
	cmd := exec.Command(bin, "-only", "engine", "-engine-cpu-only", "-engine-cpu-serve", "-engine-cpu-rounds", fmt.Sprint(rounds),
		"-duration", d.String(), "-out", outPath)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &abSide{name: name, cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// next is the side's next "cpuab" line, without the prefix.
func (s *abSide) next() (string, error) {
	for s.out.Scan() {
		if v, ok := strings.CutPrefix(s.out.Text(), "cpuab "); ok {
			return v, nil
		}
	}
	if err := s.out.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("engine: the %s side ended", s.name)
}

// round has the side run round k and answers its shares.
func (s *abSide) round(k int) (map[string]cpuShare, error) {
	if _, err := fmt.Fprintf(s.in, "round %d\n", k); err != nil {
		return nil, err
	}
	line, err := s.next()
	if err != nil {
		return nil, err
	}
	var v map[string][4]float64
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		return nil, err
	}
	out := map[string]cpuShare{}
	for name, x := range v {
		out[name] = cpuShare{regional: x[0], router: x[1], other: x[2], requests: int64(x[3])}
	}
	return out, nil
}

// benchEngineCPUAB runs the old build's bench (oldBin) and this one side
// by side, each its own databases and platform, and alternates their
// rounds ABBA: pair k runs old then new when k is even, new then old when
// odd, so neither side always follows the other. Both sides set up at
// once and idle while the other measures. It prints the report on
// stderr; nothing is written to the figures' file.
func benchEngineCPUAB(oldBin string, d time.Duration, pairs int) error {
	newBin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tally-cpuab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var sides [2]*abSide
	for i, x := range []struct{ name, bin string }{{"old", oldBin}, {"new", newBin}} {
		if sides[i], err = startSide(x.name, x.bin, d, pairs, dir+"/"+x.name+".md"); err != nil {
			return err
		}
		defer func(s *abSide) {
			s.in.Close()
			_ = s.cmd.Wait()
		}(sides[i])
	}
	for _, s := range sides {
		if _, err := s.next(); err != nil { // "ready"
			return err
		}
	}
	var got [2]cpuRounds
	got[0], got[1] = cpuRounds{}, cpuRounds{}
	for k := range pairs {
		order := []int{0, 1}
		if k%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			fmt.Fprintf(os.Stderr, "bench: engine: CPU A/B pair %d of %d, %s\n", k+1, pairs, sides[i].name)
			round, err := sides[i].round(k)
			if err != nil {
				return err
			}
			for name, s := range round {
				got[i][name] = append(got[i][name], s)
			}
		}
	}
	fmt.Fprint(os.Stderr, cpuABReport(got[0], got[1], d, pairs))
	return nil
}

// cpuABReport is the A/B's table: each build's median rounds by tier and
// each path's paired ratios new ÷ old.
func cpuABReport(old, nw cpuRounds, d time.Duration, pairs int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Engine CPU A/B\n\n%d pairs of rounds (ABBA), each round the three paths in turn for %s at 200/s.\n\n",
		pairs, cpuRoundPhase(d))
	b.WriteString("| path | old: regional / router / platform ms (median round; least–most) | new: the same | platform new ÷ old, paired | regional new ÷ old, paired |\n|---|---|---|---|---|\n")
	for _, name := range cpuPaths {
		oReg, oRouter, oPlat, _ := old.tiers(name)
		nReg, nRouter, nPlat, _ := nw.tiers(name)
		fmt.Fprintf(&b, "| %s | %s / %s / %s | %s / %s / %s | %s | %s |\n", name, spread(oReg), spread(oRouter), spread(oPlat),
			spread(nReg), spread(nRouter), spread(nPlat), pairedRatios(nPlat, oPlat), pairedRatios(nReg, oReg))
	}
	return b.String()
}
