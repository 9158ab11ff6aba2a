package router_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/apiversion"
)

// A request is served in its project's pinned version unless it names
// another; the effective version is echoed, travels to the regional
// service in the signed identity, and its differences are applied there
// by transforms the handlers never see.
func TestRequestsAreServedInTheirProjectsOrTheirOwnVersion(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api") // pinned to the newest
	// A change made in v2018-08-01 to one route, for this test: older
	// versions call a customer's name its title.
	e.Stack.Regional["api"].Versions().Add(apiversion.Transform{Method: "GET", Route: "/v1/customers/:customerId",
		Since: "v2018-08-01", Response: func(status int, b []byte) ([]byte, error) {
			var m map[string]any
			if status != 200 || json.Unmarshal(b, &m) != nil {
				return b, nil
			}
			m["title"] = m["name"]
			delete(m, "name")
			return json.Marshal(m)
		}})
	c := e.Do(t, "POST", stacktest.URL("api", "/v1/customers"), p.Header(), map[string]any{"source_id": "ann", "name": "Ann"}).JSON(t)
	get := func(version string) stacktest.Resp {
		h := p.Header()
		if version != "" {
			h.Set(apiversion.Header, version)
		}
		return e.Do(t, "GET", stacktest.URL("api", "/v1/customers/"+c["id"].(string)), h, nil)
	}
	r := get("")
	if m := r.JSON(t); r.Status != 200 || m["name"] != "Ann" || m["title"] != nil || r.Header.Get(apiversion.Header) != "v2018-08-01" {
		t.Fatalf("the pinned newest version: %d %v, echoed %q", r.Status, m, r.Header.Get(apiversion.Header))
	}
	r = get("v2017-04-20")
	if m := r.JSON(t); r.Status != 200 || m["title"] != "Ann" || m["name"] != nil || r.Header.Get(apiversion.Header) != "v2017-04-20" {
		t.Fatalf("an older version named by the header: %d %v, echoed %q", r.Status, m, r.Header.Get(apiversion.Header))
	}
	r = get("v2019-01-01")
	m := r.JSON(t)
	if details, _ := m["details"].(string); r.Status != 400 || m["key"] != "invalid_api_version" ||
		!strings.Contains(details, "v2017-04-05, v2017-04-20, v2018-08-01") {
		t.Fatalf("an unknown version: %d %s", r.Status, r.Body)
	}

	// A project pinned to an older version is served in it, and its
	// version changes only when an admin sets it.
	old := e.Do(t, "POST", "http://api.localhost/management/v1/projects", e.MgmtHeader(),
		map[string]any{"name": "old", "cluster_id": "api", "api_version": "v2017-04-20"})
	om := old.JSON(t)
	if old.Status != 200 || om["api_version"] != "v2017-04-20" {
		t.Fatalf("create pinned to v2017-04-20: %d %s", old.Status, old.Body)
	}
	key := om["server_side_key"].(map[string]any)
	oldHeader := http.Header{"X-App-Id": {key["app_id"].(string)}, "X-App-Token": {key["app_token"].(string)}}
	if r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers"), oldHeader, nil); r.Header.Get(apiversion.Header) != "v2017-04-20" {
		t.Fatalf("the old project's requests: echoed %q", r.Header.Get(apiversion.Header))
	}
	path := "http://api.localhost/management/v1/projects/" + om["id"].(string)
	if r := e.Do(t, "PUT", path, e.MgmtHeader(), map[string]any{"api_version": "v2018-08-01"}); r.Status != 400 {
		t.Fatalf("PUT project changing api_version: %d %s, want 400 (it is pinned)", r.Status, r.Body)
	}
	if r := e.Do(t, "PUT", path+"/api-version", e.MgmtHeader(), map[string]any{"api_version": "v1"}); r.Status != 400 ||
		r.JSON(t)["key"] != "invalid_api_version" {
		t.Fatalf("an unknown version for the project: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "PUT", path+"/api-version", e.MgmtHeader(), map[string]any{"api_version": "v2018-08-01"}); r.Status != 200 ||
		r.JSON(t)["api_version"] != "v2018-08-01" {
		t.Fatalf("the admin's upgrade: %d %s", r.Status, r.Body)
	}
	stacktest.Eventually(t, 5e9, "the upgrade reaching the router", func() bool {
		r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers"), oldHeader, nil)
		return r.Header.Get(apiversion.Header) == "v2018-08-01"
	})
	if r := e.Do(t, "POST", "http://api.localhost/management/v1/projects", e.MgmtHeader(),
		map[string]any{"name": "x", "cluster_id": "api", "api_version": "2018-08-01"}); r.Status != 400 {
		t.Fatalf("create with an unknown version: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "PUT", path, e.MgmtHeader(), map[string]any{"webhook_version": "v2023-01-01"}); r.Status != 400 ||
		r.JSON(t)["key"] != "invalid_webhook_version" {
		t.Fatalf("an unknown webhook version: %d %s", r.Status, r.Body)
	}

	vs := e.Do(t, "GET", "http://api.localhost/management/v1/api-versions", e.MgmtHeader(), nil)
	var list struct {
		Data []struct {
			Name       string   `json:"api_version"`
			Deprecated bool     `json:"deprecated"`
			Latest     bool     `json:"latest"`
			Changes    []string `json:"changes"`
		} `json:"data"`
		Webhooks []struct {
			Name string `json:"api_version"`
		} `json:"webhook_versions"`
	}
	if err := json.Unmarshal(vs.Body, &list); err != nil || len(list.Data) != 3 || list.Data[0].Name != "v2017-04-05" ||
		!list.Data[0].Deprecated || !list.Data[2].Latest || len(list.Data[1].Changes) == 0 || len(list.Webhooks) != 1 {
		t.Fatalf("api versions: %d %s", vs.Status, vs.Body)
	}
}
