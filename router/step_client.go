package router

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/tenancy"
)

// clientAddr is who is calling: the address the per-address limits and
// the X-Forwarded-For passed on are about.
type clientAddr struct {
	ip    string // the caller's address
	chain string // the X-Forwarded-For hops before it, to pass on
	proto string // X-Forwarded-Proto from a trusted proxy
}

// clientStep finds the caller's address, believing forwarding headers
// only from trusted proxies, and charges the request's directory lookups
// to that address's budget (lookupBudget): every later step that reads the
// directory draws on it.
type clientStep struct {
	proxies proxies
	// budget is the lookup budget of an address.
	budget func(ip string) tenancy.LookupBudget
}

func (s clientStep) serve(c echo.Context, x *call, next handler) error {
	req := c.Request()
	x.client = s.proxies.clientAddr(req)
	if s.budget != nil {
		c.SetRequest(req.WithContext(tenancy.WithLookupBudget(req.Context(), s.budget(x.client.ip))))
	}
	return next(c, x)
}

// proxies are the networks whose X-Forwarded-For is believed.
type proxies []netip.Prefix

// clientAddr returns the caller's address, the X-Forwarded-For chain to
// pass on, and the forwarded protocol, walking the chain from the right
// as far as trust goes.
func (p proxies) clientAddr(req *http.Request) clientAddr {
	remote, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		remote = req.RemoteAddr
	}
	if !p.trusted(remote) {
		return clientAddr{ip: remote}
	}
	var hops []string
	for _, v := range req.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	ip := remote
	i := len(hops) - 1
	for ; i >= 0; i-- {
		ip = hops[i]
		if !p.trusted(ip) {
			break
		}
	}
	return clientAddr{ip: ip, chain: strings.Join(hops[:max(i, 0)], ", "), proto: req.Header.Get("X-Forwarded-Proto")}
}

func (p proxies) trusted(ip string) bool {
	if len(p) == 0 {
		return false
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	return p.contain(a)
}

func (p proxies) contain(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p {
		if n.Contains(a) {
			return true
		}
	}
	return false
}
