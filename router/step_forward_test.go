package router

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

// seenUpstream is what an upstream received.
type seenUpstream struct {
	path, query, xff, proto string
	id                      identity.Identity
	err                     error
}

func TestForwardStepSignsAndForwardsToTheRightUpstream(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	signer, err := identity.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	upstream := func(t *testing.T, seen *[]seenUpstream) *url.URL {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, err := signer.Verify(r.Header.Get(identity.Header), r.URL.RawQuery, time.Now())
			*seen = append(*seen, seenUpstream{path: r.URL.Path, query: r.URL.RawQuery, xff: r.Header.Get("X-Forwarded-For"),
				proto: r.Header.Get("X-Forwarded-Proto"), id: id, err: err})
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		return u
	}
	p1 := tenancy.Project{ID: "p1", Cluster: "api"}
	client := clientAddr{ip: "198.51.100.7", chain: "203.0.113.1", proto: "https"}
	cases := []struct {
		name       string
		method     string
		target     string
		x          call
		management bool // the answer comes from management, not the cluster
		oauth      bool // answered by the router itself
		wantPath   string
		wantID     identity.Identity
	}{
		{"the application API to the cluster", "GET", "/v1/customers?limit=5",
			call{client: client, surface: surface{api: apiApp}, caller: caller{project: p1, key: tenancy.AppKey{AppID: "app1"}, kind: identity.KindApp}, version: "v2018-08-01"},
			false, false, "/v1/customers",
			identity.Identity{Audience: identity.AudienceRegional, ProjectID: "p1", Cluster: "api", Kind: identity.KindApp, KeyID: "app1", APIVersion: "v2018-08-01"}},
		{"the client-side API with its narrower rights, whatever the credential", "POST", "/client/v1/validations",
			call{client: client, surface: surface{api: apiClient}, caller: caller{project: p1, key: tenancy.AppKey{AppID: "app1"},
				token: tenancy.Token{Scopes: []string{"client_api"}, Binding: tenancy.Binding{Customer: "cust_1"}}, kind: identity.KindApp}, version: "v2018-08-01"},
			false, false, "/client/v1/validations",
			identity.Identity{Audience: identity.AudienceRegional, ProjectID: "p1", Cluster: "api", Kind: identity.KindClient, KeyID: "app1",
				APIVersion: "v2018-08-01", Scopes: []string{"client_api"}, Customer: "cust_1"}},
		{"an export's file, from its route on the cluster", "GET", "/v1/exports/exp_1?token=t",
			call{client: client, surface: surface{api: apiApp, exportID: "exp_1", file: true}, caller: caller{project: p1, key: tenancy.AppKey{AppID: "exp_1"}, kind: identity.KindDownload}, version: "v2018-08-01"},
			false, false, "/v1/exports/exp_1/download",
			identity.Identity{Audience: identity.AudienceRegional, ProjectID: "p1", Cluster: "api", Kind: identity.KindDownload, KeyID: "exp_1", APIVersion: "v2018-08-01"}},
		{"the management API to management", "GET", "/management/v1/projects",
			call{client: client, surface: surface{api: apiManagement}, caller: caller{management: tenancy.ManagementKey{ID: "m1"}, kind: identity.KindManagement}},
			true, false, "/management/v1/projects",
			identity.Identity{Audience: identity.AudienceManagement, Cluster: "api", Kind: identity.KindManagement, KeyID: "m1"}},
		{"the OAuth endpoints, served here", "POST", "/v1/oauth/introspect",
			call{client: client, surface: surface{api: apiOAuth}, caller: caller{project: p1, key: tenancy.AppKey{AppID: "app1"}, kind: identity.KindApp}},
			false, true, "", identity.Identity{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var toCluster, toManagement []seenUpstream
			clusterURL, mgmtURL := upstream(t, &toCluster), upstream(t, &toManagement)
			x := tc.x
			x.route = route{cluster: tenancy.Cluster{Name: "api", UpstreamURL: clusterURL.String()}}
			s := &forwardStep{signer: signer, fwd: newForwarder(time.Second), management: mgmtURL, upstreams: &upstreamCache{},
				oauth: oauthEndpoint{tokens: noTokens{}, now: time.Now}, log: slog.New(slog.DiscardHandler)}
			req := httptest.NewRequest(tc.method, tc.target, strings.NewReader("access_token=unknown"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			res := serveStep(t, stepFunc(func(c echo.Context, x *call, _ handler) error { return s.handle(c, x) }), req, x)
			if res.rec.Code != http.StatusOK {
				t.Fatalf("answered %d (%s)", res.rec.Code, res.rec.Body)
			}
			got, other := toCluster, toManagement
			if tc.management {
				got, other = toManagement, toCluster
			}
			if tc.oauth {
				if len(toCluster)+len(toManagement) != 0 || !strings.Contains(res.rec.Body.String(), `"active":false`) {
					t.Fatalf("OAuth: %d forwarded, answer %s", len(toCluster)+len(toManagement), res.rec.Body)
				}
				return
			}
			if len(got) != 1 || len(other) != 0 {
				t.Fatalf("%d requests reached the right upstream, %d the other", len(got), len(other))
			}
			u := got[0]
			if u.err != nil || u.path != tc.wantPath {
				t.Fatalf("upstream got %s, identity error %v; want %s", u.path, u.err, tc.wantPath)
			}
			if u.xff != "203.0.113.1, 198.51.100.7" || u.proto != "https" {
				t.Fatalf("forwarded for %q proto %q", u.xff, u.proto)
			}
			id, want := u.id, tc.wantID
			if id.Audience != want.Audience || id.ProjectID != want.ProjectID || id.Cluster != want.Cluster || id.Kind != want.Kind ||
				id.KeyID != want.KeyID || id.APIVersion != want.APIVersion || id.Customer != want.Customer ||
				strings.Join(id.Scopes, ",") != strings.Join(want.Scopes, ",") || id.Method != tc.method || id.Path != tc.wantPath {
				t.Fatalf("identity %+v, want %+v", id, want)
			}
		})
	}
}

// noTokens is a directory with no access tokens.
type noTokens struct{}

func (noTokens) IssueToken(context.Context, tenancy.AppKey, []string, tenancy.Binding) (string, tenancy.Token, error) {
	return "", tenancy.Token{}, tenancy.ErrTooManyTokens
}
func (noTokens) Token(context.Context, string) (tenancy.Token, error) {
	return tenancy.Token{}, tenancy.ErrTokenNotFound
}
func (noTokens) RevokeToken(context.Context, string, string) error { return tenancy.ErrTokenNotFound }
