package router_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// Clients that cannot resolve *.localhost, or that drop the Host header,
// reach every cluster through the base URLs `tally dev` prints: each
// cluster's own port, and bare loopback on the router's port for api. The
// client here is Go's default one, with the default resolver.
func TestEveryClusterIsReachableWithoutAHostName(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{Clusters: stacktest.AllClusters})
	creds, err := e.Stack.Bootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	get := func(url, appID, token string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		req.Header.Set("X-App-Id", appID)
		req.Header.Set("X-App-Token", token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return res.StatusCode, m
	}
	if len(creds.Projects) != 3 {
		t.Fatalf("%d demo projects, want one per cluster", len(creds.Projects))
	}
	for _, p := range creds.Projects {
		if !strings.HasPrefix(p.BaseURL, "http://127.0.0.1:") || !strings.Contains(p.HostURL, ".localhost:") {
			t.Fatalf("%s: base_url %q, host_url %q", p.Cluster, p.BaseURL, p.HostURL)
		}
		if status, m := get(p.BaseURL+"/v1/customers", p.AppID, p.AppToken); status != 200 || m["object"] != "list" {
			t.Fatalf("%s through %s: %d %v", p.Cluster, p.BaseURL, status, m)
		}
		// Another cluster's port names this project's port.
		for _, o := range creds.Projects {
			if o.Cluster == p.Cluster {
				continue
			}
			status, m := get(o.BaseURL+"/v1/customers", p.AppID, p.AppToken)
			if details, _ := m["details"].(string); status != 421 || !strings.Contains(details, p.BaseURL) {
				t.Fatalf("%s's project on %s's port: %d %v, want 421 naming %s", p.Cluster, o.Cluster, status, m, p.BaseURL)
			}
		}
	}
	// Bare loopback on the router's own port is the api cluster.
	api := creds.Projects[0]
	for _, host := range []string{"127.0.0.1", "localhost"} {
		url := strings.Replace(e.Stack.RouterURL, "127.0.0.1", host, 1) + "/v1/customers"
		if status, _ := get(url, api.AppID, api.AppToken); status != 200 {
			t.Fatalf("api through %s: %d", url, status)
		}
	}
	us := creds.Projects[1]
	if status, _ := get(e.Stack.RouterURL+"/v1/customers", us.AppID, us.AppToken); status != 421 {
		t.Fatalf("us1's project on the router's bare loopback: %d, want 421 (it is the api cluster)", status)
	}
}

// A request whose chunked body is malformed is the client's error: 400,
// never a 5xx blaming the upstream.
func TestAMalformedChunkedBodyIs400(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	addr := strings.TrimPrefix(e.Stack.RouterURL, "http://")
	for _, ct := range []string{"application/json", "text/csv"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "POST /v1/customers HTTP/1.1\r\nHost: api.localhost\r\nX-App-Id: "+p.AppID+"\r\nX-App-Token: "+p.AppToken+
			"\r\nContent-Type: "+ct+"\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\nzz\r\nmore\r\n0\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", ct, err)
		}
		b, _ := io.ReadAll(res.Body)
		c.Close()
		var m map[string]any
		if res.StatusCode != 400 || json.Unmarshal(b, &m) != nil || m["code"] != float64(400) {
			t.Fatalf("%s: %d %s, want 400 with a JSON error", ct, res.StatusCode, b)
		}
	}
}
