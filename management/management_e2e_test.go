package management_test

import (
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
)

const base = "http://api.localhost/management/v1"

func TestProjectLifecycleThroughTheRouter(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	h := e.MgmtHeader()

	r := e.Do(t, "POST", base+"/projects", h, map[string]any{"name": "Shop", "cluster_id": "as1", "currency": "EUR",
		"client_trusted_domains": []string{"https://shop.example"}})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	p := r.JSON(t)
	id := p["id"].(string)
	key := p["server_side_key"].(map[string]any)
	client, _ := p["client_side_key"].(map[string]any) // made with the project, like the server-side pair
	if !strings.HasPrefix(id, "proj_") || p["cluster_id"] != "as1" || p["api_version"] != "v2018-08-01" ||
		p["currency"] != "EUR" || key["app_token"] == "" || client["app_token"] == "" || client["app_id"] == key["app_id"] {
		t.Fatalf("created project: %s", r.Body)
	}
	// The key pair works at once.
	app := stacktest.Project{ID: id, AppID: key["app_id"].(string), AppToken: key["app_token"].(string)}
	if r := e.Do(t, "GET", stacktest.URL("as1", "/v1/customers"), app.Header(), nil); r.Status != 200 {
		t.Fatalf("new key: %d %s", r.Status, r.Body)
	}

	if r := e.Do(t, "GET", base+"/projects/"+id, h, nil); r.Status != 200 || r.JSON(t)["name"] != "Shop" {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "PUT", base+"/projects/"+id, h, map[string]any{"name": "Shop 2", "timezone": "Europe/Oslo"}); r.Status != 200 ||
		r.JSON(t)["name"] != "Shop 2" || r.JSON(t)["updated_at"] == nil {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "PUT", base+"/projects/"+id, h, map[string]any{"cluster_id": "us1"}); r.Status != 400 {
		t.Fatalf("moving a project: %d %s", r.Status, r.Body)
	}
	r = e.Do(t, "GET", base+"/projects?limit=1", h, nil)
	if m := r.JSON(t); r.Status != 200 || m["total"] != float64(1) || len(m["data"].([]any)) != 1 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}

	// Another client-side key; list; revoke.
	r = e.Do(t, "POST", base+"/projects/"+id+"/api-keys", h, map[string]any{"name": "web", "kind": "client"})
	if r.Status != 200 || r.JSON(t)["kind"] != "client" || r.JSON(t)["app_token"] == "" {
		t.Fatalf("create key: %d %s", r.Status, r.Body)
	}
	r = e.Do(t, "GET", base+"/projects/"+id+"/api-keys", h, nil)
	if m := r.JSON(t); m["total"] != float64(3) || strings.Contains(string(r.Body), app.AppToken) {
		t.Fatalf("list keys (tokens must not be shown): %s", r.Body)
	}

	// Deleting the project revokes its keys.
	if r := e.Do(t, "DELETE", base+"/projects/"+id, h, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", base+"/projects/"+id, h, nil); r.Status != 404 || r.JSON(t)["resource_type"] != "project" {
		t.Fatalf("get deleted: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "DELETE", base+"/projects/"+id, h, nil); r.Status != 404 {
		t.Fatalf("delete twice: %d %s", r.Status, r.Body)
	}
}

func TestProjectInputIsValidated(t *testing.T) {
	t.Parallel()
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	for name, body := range map[string]any{
		"no name":         map[string]any{"cluster_id": "api"},
		"no cluster":      map[string]any{"name": "x"},
		"unknown cluster": map[string]any{"name": "x", "cluster_id": "mars1"},
		"bad currency":    map[string]any{"name": "x", "cluster_id": "api", "currency": "euro"},
		"bad api version": map[string]any{"name": "x", "cluster_id": "api", "api_version": "v2030-01-01"},
		"malformed":       `{"name":`,
		"a trusted domain with a path": map[string]any{"name": "x", "cluster_id": "api",
			"client_trusted_domains": []string{"https://shop.example/checkout"}},
	} {
		r := e.Do(t, "POST", base+"/projects", e.MgmtHeader(), body)
		want := "invalid_payload"
		if name == "bad api version" {
			want = "invalid_api_version" // as for the request header
		}
		if r.Status != 400 || r.JSON(t)["key"] != want {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	if r := e.Do(t, "DELETE", base+"/projects/proj_nope/api-keys/nope", e.MgmtHeader(), nil); r.Status != 404 {
		t.Fatalf("revoke unknown key: %d %s", r.Status, r.Body)
	}
}
