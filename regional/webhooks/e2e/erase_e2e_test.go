package e2e_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Once a permanent deletion has answered DONE, no webhook delivery sends
// the customer's data, whenever it was claimed:
//   - a delivery whose body is being sent when the deletion commits (Bob's
//     customer.updated, held by its receiver) is waited for: the deletion
//     answers only after the receiver has answered;
//   - a delivery claimed before the deletion and held between its claim
//     and its send (Ann's customer.created, held by Options.Claimed) sends,
//     after the deletion's answer, a body without her values.
func TestNoDeliverySendsACustomersDataOnceTheirDeletionIsDone(t *testing.T) {
	t.Parallel()
	var holdNext atomic.Bool
	claimed, releaseClaim := make(chan struct{}), make(chan struct{})
	e := stacktest.Start(t, stacktest.Options{Webhooks: &webhooks.Options{AllowPrivateTargets: true,
		BackoffBase: 200 * time.Millisecond, Timeout: 5 * time.Second,
		Claimed: func(context.Context, string, string) {
			if holdNext.CompareAndSwap(true, false) {
				claimed <- struct{}{}
				<-releaseClaim
			}
		}}})
	a := stacktest.API{T: t, E: e, P: e.CreateProject(t, "api")}

	// The receiver records each body as it arrives, and holds Bob's update
	// until released.
	var mu sync.Mutex
	var bodies []string
	bobArrived, releaseBob := make(chan struct{}, 1), make(chan struct{})
	var bobReleased atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if strings.Contains(string(b), `"customer.updated"`) && strings.Contains(string(b), "Bob Sending") {
			bobArrived <- struct{}{}
			<-releaseBob
			bobReleased.Store(time.Now().UnixNano())
		}
	}))
	t.Cleanup(srv.Close)
	if r := e.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/webhooks", e.MgmtHeader(),
		map[string]any{"target_url": srv.URL + "/hooks", "events": []string{"customer.created", "customer.updated"}}); r.Status != 200 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	received := func(id string) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, b := range bodies {
			if strings.Contains(b, id) {
				out = append(out, b)
			}
		}
		return out
	}

	// Bob: his update's body is at the receiver when he is deleted.
	bob := a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob-sending", "name": "Bob Sending"})["id"].(string)
	a.OK("PUT", "/v1/customers/"+bob, map[string]any{"email": "bob.sending@example.com"})
	select {
	case <-bobArrived:
	case <-time.After(15 * time.Second):
		t.Fatal("Bob's update never reached the receiver")
	}
	answered := make(chan int64, 1)
	go func() {
		r := a.Do("POST", "/v1/customers/"+bob+"/permanent-deletion", nil)
		if r.Status != 200 {
			t.Errorf("Bob's deletion: %d %s", r.Status, r.Body)
		}
		answered <- time.Now().UnixNano()
	}()
	select {
	case <-answered:
		close(releaseBob)
		t.Fatal("Bob's deletion answered while a body with his data was still being sent")
	case <-time.After(700 * time.Millisecond):
	}
	close(releaseBob)
	select {
	case at := <-answered:
		if at < bobReleased.Load() {
			t.Fatal("Bob's deletion answered before his update's send was over")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Bob's deletion never answered")
	}

	// Ann: her notice is claimed, and held, before she is deleted.
	values := []string{"Ann Claimedbefore", "ann.claimed@example.com", "ann-claimed", "+48 600 111 222"}
	holdNext.Store(true)
	ann := a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann-claimed", "name": "Ann Claimedbefore",
		"email": "ann.claimed@example.com", "phone": "+48 600 111 222"})["id"].(string)
	select {
	case <-claimed:
	case <-time.After(15 * time.Second):
		t.Fatal("Ann's notice was never claimed")
	}
	if d := a.OK("POST", "/v1/customers/"+ann+"/permanent-deletion", nil); d["status"] != "DONE" {
		close(releaseClaim)
		t.Fatalf("Ann's deletion: %v", d)
	}
	close(releaseClaim)
	stacktest.Eventually(t, 15*time.Second, "Ann's notice delivered", func() bool { return len(received(ann)) > 0 })
	for _, b := range received(ann) {
		for _, v := range values {
			if strings.Contains(b, v) {
				t.Errorf("a body sent after her deletion's answer holds %q: %s", v, b)
			}
		}
	}
}
