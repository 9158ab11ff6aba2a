package router

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/tallyhq/tally/tenancy"
)

func TestHostStepResolvesTheCluster(t *testing.T) {
	eu := tenancy.Cluster{Name: "api", APIHost: "api.tally.test"}
	dir := &fakeDirectory{hosts: map[string]route{
		"api.tally.test":      {cluster: eu, kind: tenancy.APIHost},
		"download.tally.test": {cluster: eu, kind: tenancy.DownloadHost},
	}}
	cases := []struct {
		name, host string
		fixed      string // served as this host whatever the header (HandlerFor)
		down       bool   // the directory unreachable
		code       int
		want       route
	}{
		{"the API host", "api.tally.test", "", false, 0, route{host: "api.tally.test", cluster: eu, kind: tenancy.APIHost}},
		{"with a port, upper case and a trailing dot", "API.Tally.Test.:8443", "", false, 0, route{host: "api.tally.test", cluster: eu, kind: tenancy.APIHost}},
		{"the download host", "download.tally.test", "", false, 0, route{host: "download.tally.test", cluster: eu, kind: tenancy.DownloadHost}},
		{"a bare loopback host, served as the api cluster's", "localhost:8080", "", false, 0, route{host: "api.tally.test", cluster: eu, kind: tenancy.APIHost}},
		{"a fixed host beats the header", "evil.example", "api.tally.test", false, 0, route{host: "api.tally.test", cluster: eu, kind: tenancy.APIHost}},
		{"a name in the domain no cluster has", "eu9.api.tally.test", "", false, http.StatusNotFound, route{}},
		{"outside the domain", "tally.test.evil.example", "", false, http.StatusNotFound, route{}},
		{"the bare domain", "tally.test", "", false, http.StatusNotFound, route{}},
		{"the directory unreachable", "api.tally.test", "", true, http.StatusServiceUnavailable, route{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir.err = nil
			if tc.down {
				dir.err = errors.New("connection refused")
			}
			s := hostStep{domain: "tally.test", loopback: "api.tally.test", hosts: dir}
			req := newReq("GET", "/v1/customers")
			req.Host = tc.host
			if tc.fixed != "" {
				req = req.WithContext(context.WithValue(req.Context(), fixedHostKey{}, tc.fixed))
			}
			res := serveStep(t, s, req, call{})
			if res.code() != tc.code {
				t.Fatalf("answered %d (%s), want %d", res.rec.Code, res.rec.Body, tc.code)
			}
			if res.next != nil && res.next.route != tc.want {
				t.Fatalf("route %+v, want %+v", res.next.route, tc.want)
			}
		})
	}
}

// A host outside the domain costs no directory lookup.
func TestHostStepLooksUpNoHostOutsideTheDomain(t *testing.T) {
	var lookups int
	s := hostStep{domain: "tally.test", hosts: countingHosts{&lookups}}
	req := newReq("GET", "/")
	req.Host = "attacker.example"
	if res := serveStep(t, s, req, call{}); res.code() != http.StatusNotFound || lookups != 0 {
		t.Fatalf("answered %d after %d lookups", res.rec.Code, lookups)
	}
}

type countingHosts struct{ n *int }

func (h countingHosts) Host(context.Context, string) (tenancy.Cluster, tenancy.HostKind, error) {
	*h.n++
	return tenancy.Cluster{}, 0, tenancy.ErrUnknownHost
}
