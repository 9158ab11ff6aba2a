package router

import (
	"net/netip"
	"testing"

	"github.com/tallyhq/tally/tenancy"
)

func TestClientStepBelievesForwardingHeadersOnlyFromTrustedProxies(t *testing.T) {
	cases := []struct {
		name, remote, xff, proto string
		want                     clientAddr
	}{
		{"direct client, claim ignored", "203.0.113.9:5000", "1.2.3.4", "https", clientAddr{ip: "203.0.113.9"}},
		{"through a trusted proxy", "10.0.0.2:5000", "198.51.100.7", "https", clientAddr{ip: "198.51.100.7", proto: "https"}},
		{"spoofed hop left of the client", "10.0.0.2:5000", "6.6.6.6, 198.51.100.7", "", clientAddr{ip: "198.51.100.7", chain: "6.6.6.6"}},
		{"two trusted proxies", "10.0.0.2:5000", "198.51.100.7, 10.1.1.1", "", clientAddr{ip: "198.51.100.7"}},
		{"only trusted hops", "10.0.0.2:5000", "10.9.9.9", "", clientAddr{ip: "10.9.9.9"}},
		{"a trusted proxy sending no chain", "10.0.0.2:5000", "", "", clientAddr{ip: "10.0.0.2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var budgetFor []string
			s := clientStep{proxies: proxies{netip.MustParsePrefix("10.0.0.0/8")},
				budget: func(ip string) tenancy.LookupBudget { budgetFor = append(budgetFor, ip); return nil }}
			req := newReq("GET", "/v1/x", "X-Forwarded-Proto", tc.proto)
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			req.RemoteAddr = tc.remote
			res := serveStep(t, s, req, call{})
			if res.next == nil {
				t.Fatalf("the step answered %d", res.rec.Code)
			}
			if res.next.client != tc.want {
				t.Fatalf("got %+v, want %+v", res.next.client, tc.want)
			}
			// The request's directory lookups are charged to the caller's address.
			if len(budgetFor) != 1 || budgetFor[0] != tc.want.ip {
				t.Fatalf("lookup budget made for %v, want [%s]", budgetFor, tc.want.ip)
			}
		})
	}
}
