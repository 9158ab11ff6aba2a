package erasure_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// TestPermanentDeletionErasesWhatIsRetainedInTheBackground: the deletion
// answers DONE with the scans of what the project retains (the outbox,
// async results, export files) still queued: its request reads none of
// them (a notice waiting in the outbox still holds her when it answers).
// While the erasure task is held, nothing it has still to erase is
// readable: the async result that named her reads without her, the
// export file and the bulk job's report that hold her are held (409
// export_held), and the notice waiting for her webhook is delivered
// without her. Once the task is done, the export's file is gone, the
// report is kept without her values, and no row holds them, its own
// included.
func TestPermanentDeletionErasesWhatIsRetainedInTheBackground(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	values := []string{"Tess Tailend", "tess.tail@example.com", "tess-tail"}
	// A receiver that refuses until told, then records what it is sent.
	var open atomic.Bool
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		if !open.Load() && strings.Contains(string(b), "tess-tail") {
			w.WriteHeader(503)
		}
	}))
	t.Cleanup(srv.Close)
	if r := a.E.Do(t, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/webhooks", a.E.MgmtHeader(),
		map[string]any{"target_url": srv.URL + "/hooks", "events": []string{"customer.created"}}); r.Status != 200 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	a.MetadataSchema("customer", map[string]any{"tier": map[string]any{"type": "string", "eq": []any{"gold"}}})
	id := a.OK("POST", "/v1/customers", map[string]any{"source_id": "tess-tail", "name": "Tess Tailend",
		"email": "tess.tail@example.com"})["id"].(string)
	received := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
	stacktest.Eventually(t, 10*time.Second, "a refused delivery", func() bool { return len(received()) > 0 })
	// A bulk update whose result and report name her (her item refused).
	r := a.Do("POST", "/v1/customers/bulk/async", []any{map[string]any{"source_id": "tess-tail", "metadata": map[string]any{"tier": "tin"}},
		map[string]any{"source_id": "other-one"}})
	actID := r.JSON(t)["async_action_id"].(string)
	act := a.WaitAction(actID)
	if !strings.Contains(fmt.Sprint(act), "tess-tail") {
		t.Fatalf("the bulk result should name her before: %v", act)
	}
	report := act["result"].(map[string]any)["reports"].([]any)[0].(string)
	exp := a.OK("POST", "/v1/exports", map[string]any{"exported_object": "customer"})["id"].(string)
	stacktest.Eventually(t, 10*time.Second, "the export", func() bool { return a.OK("GET", "/v1/exports/"+exp, nil)["status"] == "DONE" })
	file := a.OK("GET", "/v1/exports/"+exp, nil)["result"].(map[string]any)["url"].(string)
	if f := a.E.Do(t, "GET", file, nil, nil); f.Status != 200 || !strings.Contains(string(f.Body), "Tess Tailend") {
		t.Fatalf("the export should hold her before: %d %s", f.Status, f.Body)
	}

	// Hold the erasure task: it waits for the export's row, which it turns
	// ERROR, while the test holds it (the task's other work waits in its
	// transaction, unseen).
	ctx := context.Background()
	lock, err := a.E.Stack.Regional["api"].Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM exports WHERE project_id = $1 AND id = $2 FOR UPDATE`, a.P.ID, exp); err != nil {
		t.Fatal(err)
	}
	d := a.OK("POST", "/v1/customers/"+id+"/permanent-deletion", nil)
	if d["status"] != "DONE" {
		t.Fatalf("deletion: %v", d)
	}
	// What is sent from now on never holds her: the deletion answered
	// once the sends that read her before it were over.
	before := len(received())
	if erasing(t, a) != 1 || holding(t, a, "outbox", "payload", "Tess Tailend") < 2 {
		t.Fatalf("the deletion's request should leave the outbox to its task: %d pending, %d rows hold her",
			erasing(t, a), holding(t, a, "outbox", "payload", "Tess Tailend"))
	}
	// Meanwhile: the async result without her, the files held.
	for _, p := range []string{"/v1/async-actions/" + actID, "/v1/async-actions"} {
		if body := a.Do("GET", p, nil).Body; strings.Contains(string(body), "tess-tail") {
			t.Errorf("GET %s during the erasure: %s", p, body)
		}
	}
	for _, u := range []string{file, report} {
		if f := a.E.Do(t, "GET", u, nil, nil); f.Status != 409 || !strings.Contains(string(f.Body), "export_held") {
			t.Errorf("a file during the erasure: %d %s", f.Status, f.Body)
		}
	}
	// The notice waiting for her webhook goes out (at its next try, by
	// its backoff; it may have gone during the checks above, accepted as
	// it no longer names her source id), without her.
	open.Store(true)
	stacktest.Eventually(t, 25*time.Second, "her notice delivered", func() bool {
		for _, b := range received()[before:] {
			if strings.Contains(b, id) {
				return true
			}
		}
		return false
	})
	for _, b := range received()[before:] {
		for _, v := range values {
			if strings.Contains(b, v) {
				t.Errorf("a notice sent after the deletion answered holds %q: %s", v, b)
			}
		}
	}
	if erasing(t, a) != 1 {
		t.Fatal("the erasure task finished while held")
	}

	// Let it go: it finishes, and nothing holds her.
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	stacktest.Eventually(t, 20*time.Second, "the erasure task done", func() bool { return erasing(t, a) == 0 })
	for _, v := range values {
		if n := holding(t, a, "outbox", "payload", v); n > 0 {
			t.Errorf("%d outbox rows still hold %q", n, v)
		}
		if n := holding(t, a, "async_actions", "result", v); n > 0 {
			t.Errorf("%d async results still hold %q", n, v)
		}
	}
	if x := a.OK("GET", "/v1/exports/"+exp, nil); x["status"] != "ERROR" {
		t.Errorf("the export that held her: %v", x)
	}
	if f := a.E.Do(t, "GET", file, nil, nil); f.Status == 200 || strings.Contains(string(f.Body), "tess") {
		t.Errorf("the export's file after the erasure: %d %s", f.Status, f.Body)
	}
	// The bulk job's report is kept, her values blanked.
	if f := a.E.Do(t, "GET", report, nil, nil); f.Status != 200 || strings.Contains(string(f.Body), "tess") ||
		!strings.Contains(string(f.Body), "other-one") {
		t.Errorf("the report after the erasure: %d %s", f.Status, f.Body)
	}
}
