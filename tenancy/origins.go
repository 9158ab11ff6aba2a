package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
)

// The client-side API's origins. A project's client_trusted_domains lists
// the websites its client keys may be used from: exact origins
// (https://shop.example, http://localhost:3000), patterns whose first label
// is * (https://*.shop.example: any subdomain, at any depth, not the domain
// itself), or * alone (any origin, for development). An entry or an Origin
// without a scheme is https (the client SDK in Node sends a bare host); a
// port left out is the scheme's default. Hosts compare case-insensitively.

// AnyOrigin is the entry that trusts every origin.
const AnyOrigin = "*"

// parseOrigin splits an origin into its scheme, lower-case host and port
// (the default filled in); pattern admits a host whose first label is *.
func parseOrigin(s string, pattern bool) (scheme, host, port string, ok bool) {
	if s == "" || len(s) > 300 {
		return "", "", "", false
	}
	scheme, rest := "https", s
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, rest = strings.ToLower(s[:i]), s[i+3:]
	}
	switch scheme {
	case "https":
		port = "443"
	case "http":
		port = "80"
	default:
		return "", "", "", false
	}
	host = rest
	if strings.HasPrefix(rest, "[") { // an IPv6 literal
		j := strings.IndexByte(rest, ']')
		if j < 0 {
			return "", "", "", false
		}
		host, rest = rest[:j+1], rest[j+1:]
		if rest != "" && rest[0] != ':' {
			return "", "", "", false
		}
	} else if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		host, rest = rest[:i], rest[i:]
	} else {
		rest = ""
	}
	if rest != "" {
		n, err := strconv.Atoi(rest[1:])
		if err != nil || n < 1 || n > 65535 || rest[1] == '+' {
			return "", "", "", false
		}
		port = strconv.Itoa(n)
	}
	host = strings.ToLower(host)
	name := host
	if pattern && strings.HasPrefix(host, "*.") {
		name = host[2:]
	}
	return scheme, host, port, validHost(name)
}

func validHost(h string) bool {
	if strings.HasPrefix(h, "[") {
		return len(h) > 2 && strings.Trim(h[1:len(h)-1], "0123456789abcdef:.") == "" && h[len(h)-1] == ']'
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

func originKey(scheme, host, port string) string { return scheme + "://" + host + ":" + port }

// CheckTrustedDomain says what is wrong with an entry of
// client_trusted_domains, or nil.
func CheckTrustedDomain(entry string) error {
	if entry == AnyOrigin {
		return nil
	}
	if _, _, _, ok := parseOrigin(entry, true); !ok {
		return fmt.Errorf("%q is not an origin: write scheme://host[:port], such as https://shop.example, "+
			"https://*.shop.example for its subdomains, or * for any origin (development only)", entry)
	}
	return nil
}

// Origins is a compiled set of trusted-domain entries.
type Origins struct {
	any  bool
	keys map[string]struct{}
}

// CompileOrigins compiles entries (invalid ones are skipped: management
// refuses them).
func CompileOrigins(lists ...[]string) Origins {
	o := Origins{keys: map[string]struct{}{}}
	for _, list := range lists {
		for _, e := range list {
			if e == AnyOrigin {
				o.any = true
			} else if scheme, host, port, ok := parseOrigin(e, true); ok {
				o.keys[originKey(scheme, host, port)] = struct{}{}
			}
		}
	}
	return o
}

// Allows reports whether a request with this Origin header ("" when it
// sent none) is trusted: any origin with *, otherwise an origin that an
// entry names or a pattern covers.
func (o Origins) Allows(origin string) bool {
	if o.any {
		return true
	}
	if len(o.keys) == 0 || origin == "" {
		return false
	}
	scheme, host, port, ok := parseOrigin(origin, false)
	if !ok {
		return false
	}
	if _, ok := o.keys[originKey(scheme, host, port)]; ok {
		return true
	}
	for h := host; ; {
		i := strings.IndexByte(h, '.')
		if i < 0 || strings.HasPrefix(h, "[") {
			return false
		}
		h = h[i+1:]
		if _, ok := o.keys[originKey(scheme, "*."+h, port)]; ok {
			return true
		}
	}
}

// ValidOrigin reports whether s is an origin (no pattern).
func ValidOrigin(s string) bool {
	_, _, _, ok := parseOrigin(s, false)
	return ok
}

// SameOrigin reports whether two origins are the same once normalised.
func SameOrigin(a, b string) bool {
	s1, h1, p1, ok1 := parseOrigin(a, false)
	s2, h2, p2, ok2 := parseOrigin(b, false)
	return ok1 && ok2 && s1 == s2 && h1 == h2 && p1 == p2
}

// TrustsOrigin reports whether the project's client-side API serves a
// request with this Origin header.
func (s Settings) TrustsOrigin(origin string) bool {
	return CompileOrigins(s.ClientTrustedDomains).Allows(origin)
}

// TrustedDomains are the client_trusted_domains entries of a cluster's
// live projects. A CORS preflight carries no credentials, so the router
// answers it for an origin that some project of the cluster trusts; the
// request that follows is held to its own project's list.
func TrustedDomains(ctx context.Context, q db.Querier, cluster string) ([][]string, error) {
	rows, err := q.Query(ctx, `SELECT settings->'client_trusted_domains' FROM projects
		WHERE cluster = $1 AND deleted_at IS NULL AND jsonb_typeof(settings->'client_trusted_domains') = 'array'
		AND settings->'client_trusted_domains' <> '[]'::JSONB`, cluster) // no function that fails on a scalar: AND does not short-circuit
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]string, error) {
		var raw []byte
		var list []string
		if err := r.Scan(&raw); err != nil {
			return nil, err
		}
		return list, json.Unmarshal(raw, &list)
	})
}
