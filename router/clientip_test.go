package router

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientIPTrustsForwardedForOnlyFromConfiguredProxies(t *testing.T) {
	r := &Router{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	cases := []struct {
		name, remote, xff, ip, chain string
	}{
		{"direct client, claim ignored", "203.0.113.9:5000", "1.2.3.4", "203.0.113.9", ""},
		{"through a trusted proxy", "10.0.0.2:5000", "198.51.100.7", "198.51.100.7", ""},
		{"spoofed hop left of the client", "10.0.0.2:5000", "6.6.6.6, 198.51.100.7", "198.51.100.7", "6.6.6.6"},
		{"two trusted proxies", "10.0.0.2:5000", "198.51.100.7, 10.1.1.1", "198.51.100.7", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := &http.Request{RemoteAddr: c.remote, Header: http.Header{"X-Forwarded-For": {c.xff}}}
			ip, chain, _ := r.clientIP(req)
			if ip != c.ip || chain != c.chain {
				t.Fatalf("got ip %q chain %q, want %q %q", ip, chain, c.ip, c.chain)
			}
		})
	}
}
