package deploytest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// run starts the workloads: Jobs to completion, then every pod's init
// containers in order, then the pods' containers, then waits for them to
// be ready.
func (p *Platform) run(ctx context.Context) error {
	for _, r := range p.cfg.Overlays {
		var jobs, deps []*Workload
		for _, w := range p.workloads {
			if w.Overlay != r {
				continue
			}
			if w.Kind == "Job" {
				jobs = append(jobs, w)
			} else {
				deps = append(deps, w)
			}
		}
		for _, w := range jobs {
			for _, c := range p.planned[w] {
				if err := p.complete(ctx, c); err != nil {
					return err
				}
			}
		}
		var g errGroup
		for _, w := range deps {
			g.Go(func() error {
				p.podPhase(w, podScheduled)
				var long []*container
				for _, c := range p.planned[w] {
					if c.init {
						if err := p.complete(ctx, c); err != nil {
							return err
						}
						continue
					}
					long = append(long, c)
				}
				for _, c := range long {
					if err := p.start(c); err != nil {
						return err
					}
				}
				p.podPhase(w, podRunning)
				for _, c := range long {
					if err := p.ready(ctx, c); err != nil {
						return err
					}
				}
				p.podPhase(w, podReady)
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}

type errGroup struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (g *errGroup) Go(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
		}
	}()
}

func (g *errGroup) Wait() error { g.wg.Wait(); return errors.Join(g.errs...) }

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
	stop bool // stopped by the test
	mu   sync.Mutex
}

func (p *Platform) spawn(c *container) (*proc, error) {
	logPath := filepath.Join(p.cfg.Dir, "logs", strings.ReplaceAll(c.name, "/", "_")+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(p.cfg.Binary, c.args...)
	// Exactly the container's environment: nothing of the test's own.
	cmd.Env = []string{}
	for _, k := range c.envOrder {
		cmd.Env = append(cmd.Env, k+"="+c.env[k])
	}
	cmd.Dir = c.w.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start: %w", c.name, err)
	}
	pr := &proc{name: c.name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		f.Close()
		close(pr.done)
	}()
	p.mu.Lock()
	p.procs = append(p.procs, pr)
	p.mu.Unlock()
	c.proc = pr
	p.cfg.Logf("started %s: tally %s", c.name, strings.Join(c.args, " "))
	return pr, nil
}

// complete runs an init container or a Job's container to completion.
func (p *Platform) complete(ctx context.Context, c *container) error {
	pr, err := p.spawn(c)
	if err != nil {
		return err
	}
	select {
	case <-pr.done:
	case <-time.After(60 * time.Second):
		_ = pr.cmd.Process.Kill()
		<-pr.done
		return fmt.Errorf("%s did not finish within 60 s\n%s", c.name, pr.tail())
	case <-ctx.Done():
		_ = pr.cmd.Process.Kill()
		<-pr.done
		return ctx.Err()
	}
	if pr.err != nil {
		return fmt.Errorf("%s (%s) failed: %v\n%s", c.name, kindOf(c), pr.err, pr.tail())
	}
	return nil
}

func kindOf(c *container) string {
	if c.init {
		return "initContainer of " + c.w.String()
	}
	return c.w.String()
}

func (p *Platform) start(c *container) error {
	_, err := p.spawn(c)
	return err
}

// ready polls the container's readiness probe until it answers, and
// checks its liveness probe once then.
func (p *Platform) ready(ctx context.Context, c *container) error {
	probe := c.c.ReadinessProbe
	if probe == nil {
		p.cfg.Logf("%s has no readinessProbe: waiting only to see it does not exit", c.name)
		select {
		case <-c.proc.done:
			return p.exited(c)
		case <-time.After(time.Second):
			return nil
		}
	}
	deadline := time.Now().Add(p.cfg.ReadyTimeout)
	var last string
	for {
		select {
		case <-c.proc.done:
			return p.exited(c)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		ok, what := p.probe(c, probe)
		if ok {
			break
		}
		last = what
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (%s) never became ready within %v: readinessProbe %s\n%s", c.name, kindOf(c), p.cfg.ReadyTimeout, last, c.proc.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.cfg.Logf("%s is ready", c.name)
	if lp := c.c.LivenessProbe; lp != nil {
		if ok, what := p.probe(c, lp); !ok {
			return fmt.Errorf("%s: ready, but its livenessProbe fails: %s (the kubelet would restart it)\n%s", c.name, what, c.proc.tail())
		}
	}
	return nil
}

func (p *Platform) exited(c *container) error {
	return fmt.Errorf("%s (%s) exited: %v (Kubernetes would restart it, and it would crash-loop)\n%s", c.name, kindOf(c), c.proc.err, c.proc.tail())
}

// probe runs one probe: true when it passes, else what it saw.
func (p *Platform) probe(c *container, pr *corev1.Probe) (bool, string) {
	switch {
	case pr.HTTPGet != nil:
		port, err := probePort(c.w, c.c, pr.HTTPGet.Port)
		if err != nil {
			return false, err.Error()
		}
		local, ok := c.w.ports[port]
		if !ok {
			return false, fmt.Sprintf("port %d is not a port of the pod", port)
		}
		scheme := "http"
		if pr.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		u := fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, local, pr.HTTPGet.Path)
		req, _ := http.NewRequest("GET", u, nil)
		for _, h := range pr.HTTPGet.HTTPHeaders {
			req.Header.Set(h.Name, h.Value)
		}
		// The kubelet does not verify certificates.
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		res, err := client.Do(req)
		if err != nil {
			return false, fmt.Sprintf("GET %s (port %d): %v", pr.HTTPGet.Path, port, err)
		}
		defer res.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		if res.StatusCode >= 200 && res.StatusCode < 400 {
			return true, ""
		}
		return false, fmt.Sprintf("GET %s (port %d): %d %s", pr.HTTPGet.Path, port, res.StatusCode, strings.TrimSpace(b.String()))
	case pr.TCPSocket != nil:
		port, err := probePort(c.w, c.c, pr.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.w.ports[port]), time.Second)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	}
	return false, "a probe of a kind the test does not run (exec needs a shell the image has not)"
}

func (pr *proc) tail() string {
	b, _ := os.ReadFile(pr.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "--- log of " + pr.name + " ---\n" + string(b)
}

// Err reports a long-running container that exited since the boot.
func (p *Platform) Err() error {
	var errs []error
	for _, c := range p.containers() {
		if c.init || c.w.Kind == "Job" || c.proc == nil {
			continue
		}
		select {
		case <-c.proc.done:
			c.proc.mu.Lock()
			stopped := c.proc.stop
			c.proc.mu.Unlock()
			if !stopped {
				errs = append(errs, p.exited(c))
			}
		default:
		}
	}
	return errors.Join(errs...)
}

func (p *Platform) containers() []*container {
	var out []*container
	for _, w := range p.workloads {
		out = append(out, p.planned[w]...)
	}
	return out
}

// Close stops every process (SIGTERM, then SIGKILL after 5 s).
func (p *Platform) Close() {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, pr := range p.procs {
			pr.mu.Lock()
			pr.stop = true
			pr.mu.Unlock()
			_ = pr.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, pr := range p.procs {
			select {
			case <-pr.done:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
				<-pr.done
			}
		}
		for _, a := range p.apis {
			a.srv.Close()
		}
	})
}

var (
	portMu   sync.Mutex
	portNext = 20000 + int(time.Now().UnixNano()%6000)
	portUsed = map[int]bool{}
)

// freePort is a local port nothing listens on, below Linux's ephemeral
// range (32768 and up): a port from that range, closed again until the
// process it is for starts, may meanwhile be the source port of any
// outgoing connection (the databases', say).
func freePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for i := 0; i < 12000; i++ {
		port := portNext
		portNext++
		if portNext >= 32000 {
			portNext = 20000
		}
		if portUsed[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		portUsed[port] = true
		return port, nil
	}
	return 0, errors.New("no free port below 32000")
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '.' {
			return '_'
		}
		return r
	}, s)
}
