package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/webhooks"
)

const mgmt = "http://api.localhost/management/v1"

// receiver records what reaches it; answer decides each response's status.
type receiver struct {
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	accepted map[string]int // by webhook-id
	answer   func(n int) int
	srv      *httptest.Server
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{accepted: map[string]int{}, answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.headers = append(r.headers, req.Header.Clone())
		status := r.answer(len(r.bodies))
		if status < 300 {
			r.accepted[req.Header.Get("webhook-id")]++
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func setup(t *testing.T, e *stacktest.Env, cluster, url string, events ...string) (stacktest.Project, string, string) {
	t.Helper()
	p := e.CreateProject(t, cluster)
	r := e.Do(t, "POST", mgmt+"/projects/"+p.ID+"/webhooks", e.MgmtHeader(), map[string]any{"target_url": url, "events": events})
	if r.Status != 200 {
		t.Fatalf("create webhook: %d %s", r.Status, r.Body)
	}
	secret := e.Do(t, "GET", mgmt+"/projects/"+p.ID, e.MgmtHeader(), nil).JSON(t)["webhook_token"].(string)
	return p, r.JSON(t)["id"].(string), secret
}

func TestDeliveryReachesARealReceiverAndBothSignaturesVerify(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	rcv := newReceiver(t, func(int) int { return 200 })
	p, _, secret := setup(t, e, "us1", rcv.srv.URL+"/hooks", "customer.created", "customer.deleted")

	r := e.Do(t, "POST", stacktest.URL("us1", "/v1/customers"), p.Header(), map[string]any{"source_id": "ann", "name": "Ann"})
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	custID := r.JSON(t)["id"].(string)
	// customer.updated is not subscribed: only one delivery.
	e.Do(t, "PUT", stacktest.URL("us1", "/v1/customers/ann"), p.Header(), map[string]any{"name": "Ann B"})
	stacktest.Eventually(t, 5*time.Second, "", func() bool { return rcv.count() >= 1 })
	time.Sleep(300 * time.Millisecond)
	if n := rcv.count(); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
	body, h := rcv.bodies[0], rcv.headers[0]
	if err := webhooks.Verify(h, body, secret, time.Now(), 5*time.Minute); err != nil {
		t.Fatalf("signatures: %v\n%v", err, h)
	}
	if err := webhooks.Verify(h, append([]byte(" "), body...), secret, time.Now(), 5*time.Minute); err == nil {
		t.Fatal("a changed body verified")
	}
	if err := webhooks.Verify(h, body, secret, time.Now().Add(time.Hour), 5*time.Minute); err == nil {
		t.Fatal("an old timestamp verified: replays would pass")
	}
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	obj := ev["data"].(map[string]any)["object"].(map[string]any)
	event := ev["event"].(map[string]any)
	if ev["type"] != "customer.created" || ev["project_id"] != p.ID || !strings.HasPrefix(ev["id"].(string), "evt_") ||
		ev["created_at"] == nil || obj["id"] != custID || ev["source"].(map[string]any)["channel"] != "API" ||
		event["entity_id"] != custID || event["group_id"] != r.Header.Get("X-Request-Id") {
		t.Fatalf("payload: %s", body)
	}
	if h.Get("Content-Type") != "application/json" || !strings.HasPrefix(h.Get("webhook-id"), "tsk_") {
		t.Fatalf("headers: %v", h)
	}
}

func TestReceiverFailingOnceGetsTheEventAgainAndAcceptsItOnce(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	rcv := newReceiver(t, func(n int) int {
		if n == 1 {
			return 500
		}
		return 200
	})
	p, hookID, secret := setup(t, e, "api", rcv.srv.URL, "customer.created")
	if r := e.Do(t, "POST", stacktest.URL("api", "/v1/customers"), p.Header(), map[string]any{"name": "Bo"}); r.Status != 200 {
		t.Fatal(string(r.Body))
	}
	stacktest.Eventually(t, 10*time.Second, "", func() bool { return rcv.count() >= 2 })
	time.Sleep(500 * time.Millisecond)
	rcv.mu.Lock()
	if len(rcv.bodies) != 2 || len(rcv.accepted) != 1 || string(rcv.bodies[0]) != string(rcv.bodies[1]) ||
		rcv.headers[0].Get("webhook-id") != rcv.headers[1].Get("webhook-id") {
		t.Fatalf("%d sends, accepted %v", len(rcv.bodies), rcv.accepted)
	}
	for _, h := range rcv.headers {
		if err := webhooks.Verify(h, rcv.bodies[0], secret, time.Now(), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	rcv.mu.Unlock()

	var d map[string]any
	stacktest.Eventually(t, 5*time.Second, "", func() bool {
		r := e.Do(t, "GET", mgmt+"/projects/"+p.ID+"/webhooks/"+hookID+"/deliveries", e.MgmtHeader(), nil)
		if r.Status != 200 {
			t.Fatalf("deliveries: %d %s", r.Status, r.Body)
		}
		data := r.JSON(t)["data"].([]any)
		if len(data) != 1 {
			t.Fatalf("deliveries: %s", r.Body)
		}
		d = data[0].(map[string]any)
		return d["status"] == "delivered"
	})
	attempts := d["attempts"].([]any)
	if len(attempts) != 2 || attempts[0].(map[string]any)["status_code"] != float64(500) ||
		attempts[1].(map[string]any)["status_code"] != float64(200) || d["event_type"] != "customer.created" {
		t.Fatalf("delivery: %v", d)
	}
}

func TestDeletingOrDeactivatingAWebhookStopsItsPendingDeliveries(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	for _, how := range []string{"delete", "deactivate"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel() // each waits five seconds on its own project
			rcv := newReceiver(t, func(int) int { return 503 })
			p, hookID, _ := setup(t, e, "as1", rcv.srv.URL, "customer.created")
			e.Do(t, "POST", stacktest.URL("as1", "/v1/customers"), p.Header(), map[string]any{"name": "Cy"})
			stacktest.Eventually(t, 5*time.Second, "", func() bool { return rcv.count() >= 1 })
			url := mgmt + "/projects/" + p.ID + "/webhooks/" + hookID
			var r stacktest.Resp
			if how == "delete" {
				r = e.Do(t, "DELETE", url, e.MgmtHeader(), nil)
			} else {
				r = e.Do(t, "PUT", url, e.MgmtHeader(), map[string]any{"active": false})
			}
			if r.Status >= 300 {
				t.Fatalf("%s: %d %s", how, r.Status, r.Body)
			}
			time.Sleep(3 * time.Second) // retries would come at 0.2s, 0.4s, 0.8s, 1.6s
			sent := rcv.count()
			time.Sleep(2 * time.Second)
			if rcv.count() != sent || sent > 3 {
				t.Fatalf("deliveries went on after %s: %d then %d", how, sent, rcv.count())
			}
		})
	}
}

func TestWebhookSendsDoNotCountAsAPICalls(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{})
	rcv := newReceiver(t, func(int) int { return 200 })
	p, _, _ := setup(t, e, "api", rcv.srv.URL, "customer.created", "customer.updated")
	for i := 0; i < 3; i++ {
		e.Do(t, "POST", stacktest.URL("api", "/v1/customers"), p.Header(), map[string]any{"source_id": "same", "name": fmt.Sprint(i)})
	}
	e.Do(t, "GET", stacktest.URL("api", "/v1/customers"), p.Header(), nil)
	stacktest.Eventually(t, 5*time.Second, "", func() bool { return rcv.count() == 3 })
	r := e.Do(t, "GET", mgmt+"/projects/"+p.ID+"/usage", e.MgmtHeader(), nil)
	days := r.JSON(t)["data"].([]any)
	if r.Status != 200 || len(days) != 1 || days[0].(map[string]any)["api_calls"] != float64(4) {
		t.Fatalf("usage after 4 calls and 3 webhooks: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", "http://api.localhost/management/v1/clusters/api/outbox/parked", e.MgmtHeader(), nil); r.Status != 200 ||
		r.JSON(t)["object"] != "list" {
		t.Fatalf("parked: %d %s", r.Status, r.Body)
	}
}

// Two regional replicas of one cluster, each a whole regional application
// over the same database, share the deliveries of 1,000 events: every event
// is delivered once and attempted once, and both replicas took a share.
func TestTwoRegionalReplicasShare1000DeliveriesWithNoneTwice(t *testing.T) {
	// Not in parallel with the package's other tests: its concurrent
	// clients are held to the test client's timeout.
	e := stacktest.Start(t, stacktest.Options{})
	var dbURL string
	for _, r := range e.Stack.Config().Regions {
		if r.Cluster == "api" {
			dbURL = r.DatabaseURL
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	second, err := regional.New(ctx, regional.Config{Cluster: "api", DatabaseURL: dbURL, TenancyURL: e.Stack.Config().TenancyURL,
		IdentitySecret: stacktest.Secret, OperatorSecret: e.Stack.Config().OperatorSecret, Worker: async.WorkerOptions{Poll: 20 * time.Millisecond},
		Webhooks: webhooks.Options{AllowPrivateTargets: true}, Log: telemetry.NewLogger(io.Discard, 0)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { second.RunBackground(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done; second.Close() })

	rcv := newReceiver(t, func(int) int { return 200 })
	p, _, _ := setup(t, e, "api", rcv.srv.URL+"/hooks", "customer.created")
	const n = 1000
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				r := e.Do(t, "POST", stacktest.URL("api", "/v1/customers"), p.Header(), map[string]any{"source_id": fmt.Sprintf("c%d", i)})
				if r.Status != 200 {
					t.Errorf("create customer %d: %d %s", i, r.Status, r.Body)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	stacktest.Eventually(t, 60*time.Second, "", func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return len(rcv.accepted) == n
	})
	time.Sleep(500 * time.Millisecond) // a second delivery of anything would show now
	rcv.mu.Lock()
	for id, k := range rcv.accepted {
		if k != 1 {
			t.Errorf("event %s delivered %d times", id, k)
		}
	}
	if len(rcv.bodies) != n {
		t.Errorf("%d requests for %d events", len(rcv.bodies), n)
	}
	rcv.mu.Unlock()

	pool := second.Pool()
	var owners, attempts, delivered int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT lease_owner) FROM outbox WHERE project_id = $1 AND kind = $2`,
		p.ID, webhooks.KindDeliver).Scan(&owners); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_attempts WHERE project_id = $1`, p.ID).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE project_id = $1 AND status = 'delivered' AND attempts = 1`,
		p.ID).Scan(&delivered); err != nil {
		t.Fatal(err)
	}
	if owners != 2 {
		t.Errorf("deliveries were run by %d replica(s), want both", owners)
	}
	if attempts != n || delivered != n {
		t.Errorf("%d attempts and %d deliveries delivered at the first attempt, want %d each", attempts, delivered, n)
	}
}
