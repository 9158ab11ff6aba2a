package router_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/identity"
)

// upstreamCluster registers a dedicated cluster whose "regional instance" is
// handler, and returns a project in it.
func upstreamCluster(t *testing.T, e *stacktest.Env, name string, handler http.Handler) stacktest.Project {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	r := e.Do(t, "PUT", "http://api.localhost/management/v1/clusters/"+name, e.MgmtHeader(), map[string]any{
		"region": "europe", "api_host": name + ".api.localhost", "upstream_url": srv.URL})
	if r.Status != 200 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	return e.CreateProject(t, name)
}

func TestForwardingStripsHopByHopAndCredentialsAndSignsIdentity(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	got := make(chan *http.Request, 1)
	p := upstreamCluster(t, e, "echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		w.Header().Set("Connection", "X-Upstream-Private")
		w.Header().Set("X-Upstream-Private", "1")
		w.Header().Set("X-Upstream-Public", "1")
		w.WriteHeader(201)
		fmt.Fprint(w, "hello")
	}))
	h := p.Header()
	h.Set("Connection", "X-Hop")
	h.Set("X-Hop", "1")
	h.Set("X-Tally-Identity", "forged")
	h.Set("X-Forwarded-For", "6.6.6.6")
	h.Set("X-Kept", "yes")
	r := e.Do(t, "POST", "http://echo.api.localhost/v1/anything?q=1", h, `{"a":1}`)
	if r.Status != 201 || string(r.Body) != "hello" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if r.Header.Get("X-Upstream-Private") != "" || r.Header.Get("X-Upstream-Public") != "1" {
		t.Fatalf("response headers: %v", r.Header)
	}
	in := <-got
	for _, k := range []string{"X-App-Token", "X-Hop"} {
		if in.Header.Get(k) != "" {
			t.Errorf("upstream received %s", k)
		}
	}
	if in.Header.Get("X-Kept") != "yes" || in.URL.RawQuery != "q=1" || in.URL.Path != "/v1/anything" {
		t.Errorf("request not passed on intact: %v %v", in.URL, in.Header)
	}
	if xff := in.Header.Get("X-Forwarded-For"); xff != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q: an untrusted client's claim must be dropped", xff)
	}
	if !strings.HasPrefix(in.Header.Get("Traceparent"), "00-") {
		t.Errorf("no W3C trace context: %v", in.Header)
	}
	s, _ := identity.NewSigner(stacktest.Secret)
	id, err := s.Verify(in.Header.Get(identity.Header), in.URL.RawQuery, time.Now())
	if err != nil {
		t.Fatalf("identity header: %v", err)
	}
	if _, err := s.Verify(in.Header.Get(identity.Header), "q=2", time.Now()); err == nil {
		t.Error("the identity of ?q=1 verified for ?q=2")
	}
	if id.ProjectID != p.ID || id.Cluster != "echo" || id.Kind != identity.KindApp || id.RequestID != r.Header.Get("X-Request-Id") {
		t.Fatalf("identity %+v, request id %s", id, r.Header.Get("X-Request-Id"))
	}
}

func TestForwardingStreamsTheResponse(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	release := make(chan struct{})
	p := upstreamCluster(t, e, "stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "second\n")
	}))
	req, _ := http.NewRequest("GET", "http://stream.api.localhost/v1/events", nil)
	req.Header = p.Header()
	res, err := e.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	line, err := br.ReadString('\n') // arrives before the upstream finishes
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	if line, _ := br.ReadString('\n'); line != "second\n" {
		t.Fatalf("second line %q", line)
	}
}

// A client that hangs up while its request is upstream is no upstream
// failure and no success: the router counts and logs it as 499, where it
// used to answer nothing and count a 200.
func TestAClientLeavingMidForwardIsA499(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	arrived := make(chan struct{})
	p := upstreamCluster(t, e, "slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	ctx, hangUp := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://slow.api.localhost/v1/customers", nil)
	req.Header = p.Header()
	done := make(chan error, 1)
	go func() {
		res, err := e.Client.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-arrived
	hangUp()
	if err := <-done; err == nil {
		t.Fatal("answered though the client hung up")
	}
	counted := func(code string) float64 { return e.Stack.RouterMetrics.Requests("", "", code) }
	stacktest.Eventually(t, 5*time.Second, "the hang-up counted as 499", func() bool { return counted("499") == 1 })
	if n := counted("502") + counted("503") + counted("500"); n != 0 {
		t.Fatalf("the hang-up was counted as a server error too (%v)", n)
	}
}
