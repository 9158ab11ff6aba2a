package management_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

func TestWebhookConfigurationAndDeletion(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	h := e.MgmtHeader()
	a, b := e.CreateProject(t, "us1"), e.CreateProject(t, "us1")
	hooks := func(p stacktest.Project) string { return base + "/projects/" + p.ID + "/webhooks" }

	r := e.Do(t, "POST", hooks(a), h, map[string]any{"target_url": "https://hooks.example/a", "events": []string{"customer.created"}})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	w := r.JSON(t)
	id := w["id"].(string)
	if !strings.HasPrefix(id, "wh_") || w["object"] != "webhook" || w["active"] != true || w["created_at"] == nil {
		t.Fatalf("created: %s", r.Body)
	}
	if r := e.Do(t, "PUT", hooks(a)+"/"+id, h, map[string]any{"active": false}); r.Status != 200 || r.JSON(t)["active"] != false ||
		r.JSON(t)["target_url"] != "https://hooks.example/a" {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", hooks(a), h, nil); r.Status != 200 || r.JSON(t)["total"] != float64(1) {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	for name, body := range map[string]any{
		"bad url":      map[string]any{"target_url": "ftp://x", "events": []string{"customer.created"}},
		"no events":    map[string]any{"target_url": "https://x.example", "events": []string{}},
		"bad event":    map[string]any{"target_url": "https://x.example", "events": []string{"Customer Created!"}},
		"missing both": map[string]any{},
	} {
		if r := e.Do(t, "POST", hooks(a), h, body); r.Status != 400 || r.JSON(t)["key"] != "invalid_payload" {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
	}

	// Another project's webhook is not found.
	r = e.Do(t, "DELETE", hooks(b)+"/"+id, h, nil)
	if m := r.JSON(t); r.Status != 404 || m["resource_type"] != "webhook" || m["resource_id"] != id || m["message"] != "Resource not found" {
		t.Fatalf("other project's webhook: %d %s", r.Status, r.Body)
	}
	// Without management credentials: 401.
	if r := e.Do(t, "DELETE", hooks(a)+"/"+id, nil, nil); r.Status != 401 || r.JSON(t)["key"] != "unauthorized" {
		t.Fatalf("no credentials: %d %s", r.Status, r.Body)
	}
	// Delete: 204 with no content, then 404.
	if r := e.Do(t, "DELETE", hooks(a)+"/"+id, h, nil); r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "DELETE", hooks(a)+"/"+id, h, nil); r.Status != 404 || r.JSON(t)["resource_type"] != "webhook" {
		t.Fatalf("second delete: %d %s", r.Status, r.Body)
	}

	// A plan without webhooks: 402 missing_required_feature naming the feature.
	if r := e.Do(t, "PUT", base+"/projects/"+b.ID, h, map[string]any{"plan": "free"}); r.Status != 200 || r.JSON(t)["plan"] != "free" {
		t.Fatalf("set plan: %d %s", r.Status, r.Body)
	}
	for _, method := range []string{"GET", "POST", "DELETE"} {
		url := hooks(b)
		if method == "DELETE" {
			url += "/wh_any"
		}
		r := e.Do(t, method, url, h, map[string]any{"target_url": "https://x.example", "events": []string{"customer.created"}})
		m := r.JSON(t)
		if r.Status != 402 || m["key"] != "missing_required_feature" || m["message"] != "Payment required" ||
			!strings.Contains(m["details"].(string), "webhooks") {
			t.Fatalf("%s on free plan: %d %s", method, r.Status, r.Body)
		}
	}
	if r := e.Do(t, "PUT", base+"/projects/"+b.ID, h, map[string]any{"plan": "gold-ish"}); r.Status != 400 {
		t.Fatalf("unknown plan: %d %s", r.Status, r.Body)
	}
	// A plan can be defined, and unknown projects are 404 before anything else.
	if r := e.Do(t, "PUT", base+"/plans/pro", h, map[string]any{"features": []string{"webhooks"}}); r.Status != 200 ||
		r.JSON(t)["cluster_share"] != 0.25 {
		t.Fatalf("put plan: %d %s", r.Status, r.Body)
	}
	// A plan's share of a cluster's connections: more than 0, at most 1;
	// what is accepted reads back.
	for _, bad := range []any{0, -0.5, 1.5, "half"} {
		if r := e.Do(t, "PUT", base+"/plans/pro", h, map[string]any{"cluster_share": bad}); r.Status != 400 {
			t.Fatalf("cluster_share %v: %d %s", bad, r.Status, r.Body)
		}
	}
	if r := e.Do(t, "PUT", base+"/plans/pro", h, map[string]any{"features": []string{"webhooks"}, "cluster_share": 0.5}); r.Status != 200 ||
		r.JSON(t)["cluster_share"] != 0.5 {
		t.Fatalf("put plan with a share: %d %s", r.Status, r.Body)
	}
	found := false
	for _, p := range e.Do(t, "GET", base+"/plans", h, nil).JSON(t)["data"].([]any) {
		if m := p.(map[string]any); m["name"] == "pro" {
			found = m["cluster_share"] == 0.5
		}
	}
	if !found {
		t.Fatal("the plan's share does not read back")
	}
	if r := e.Do(t, "DELETE", base+"/projects/proj_nope/webhooks/wh_x", h, nil); r.Status != 404 || r.JSON(t)["resource_type"] != "project" {
		t.Fatalf("unknown project: %d %s", r.Status, r.Body)
	}
}

func TestWebhookSecretRotates(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	p := e.CreateProject(t, "api")
	before := e.Do(t, "GET", base+"/projects/"+p.ID, e.MgmtHeader(), nil).JSON(t)["webhook_token"].(string)
	r := e.Do(t, "POST", base+"/projects/"+p.ID+"/webhook-secret/rotate", e.MgmtHeader(), nil)
	after, _ := r.JSON(t)["webhook_token"].(string)
	if r.Status != 200 || !strings.HasPrefix(after, "whsec_") || after == before || !strings.HasPrefix(before, "whsec_") {
		t.Fatalf("rotate: %d %s (before %s)", r.Status, r.Body, before)
	}
}
