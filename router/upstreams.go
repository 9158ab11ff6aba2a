package router

import (
	"fmt"
	"net/url"
	"sync"

	"github.com/tallyhq/tally/tenancy"
)

// upstreamCache keeps parsed upstream URLs by their text, so the hot path
// does not parse a URL per request.
type upstreamCache struct{ m sync.Map }

func (u *upstreamCache) get(c tenancy.Cluster) (*url.URL, error) {
	if v, ok := u.m.Load(c.UpstreamURL); ok {
		return v.(*url.URL), nil
	}
	parsed, err := url.Parse(c.UpstreamURL)
	if err != nil || parsed.Host == "" {
		return nil, fmt.Errorf("router: cluster %s has a bad upstream url %q", c.Name, c.UpstreamURL)
	}
	u.m.Store(c.UpstreamURL, parsed)
	return parsed, nil
}
