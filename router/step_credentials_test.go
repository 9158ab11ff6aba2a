package router

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/dltoken"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/tenancy"
)

func TestCredentialsStepTakesEachPathsOwnCredentials(t *testing.T) {
	p1 := tenancy.Project{ID: "p1", Cluster: "api"}
	dir := &fakeDirectory{
		projects: map[string]tenancy.Project{"p1": p1},
		keys: map[string]tenancy.AppKey{
			"app1:s3cret": {AppID: "app1", ProjectID: "p1", Kind: tenancy.KeyApp},
			"cli1:public": {AppID: "cli1", ProjectID: "p1", Kind: tenancy.KeyClient},
		},
		bearers: map[string]tenancy.Token{
			"tok-loyalties": {AppID: "app1", ProjectID: "p1", Scopes: []string{"loyalties"}},
			"tok-client":    {AppID: "app1", ProjectID: "p1", Scopes: []string{"client_api"}},
		},
		mgmt: map[string]tenancy.ManagementKey{"m1:admin": {ID: "m1"}},
	}
	links := dltoken.New([]byte("0123456789abcdef0123456789abcdef"))
	link := url.QueryEscape(links.Sign("p1", "exp_1", time.Now().Add(time.Hour)))
	strayLink := url.QueryEscape(links.Sign("p-gone", "exp_1", time.Now().Add(time.Hour)))
	basic := func(id, secret string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
	}
	file := surface{api: apiApp, exportID: "exp_1", file: true}
	cases := []struct {
		name    string
		surface surface
		path    string
		header  []string
		down    bool
		code    int
		errKey  string
		want    caller
	}{
		{"management key", surface{api: apiManagement}, "/management/v1/projects", []string{"X-Management-Id", "m1", "X-Management-Token", "admin"},
			false, 0, "", caller{management: tenancy.ManagementKey{ID: "m1"}, kind: identity.KindManagement}},
		{"management key, wrong token", surface{api: apiManagement}, "/management/v1/projects", []string{"X-Management-Id", "m1", "X-Management-Token", "no"},
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"application keys are no management keys", surface{api: apiManagement}, "/management/v1/projects", []string{"X-App-Id", "app1", "X-App-Token", "s3cret"},
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"OAuth with HTTP Basic", surface{api: apiOAuth}, "/v1/oauth/token", []string{"Authorization", basic("app1", "s3cret")},
			false, 0, "", caller{project: p1, key: dir.keys["app1:s3cret"], kind: identity.KindApp}},
		{"OAuth with the key headers", surface{api: apiOAuth}, "/v1/oauth/token", []string{"X-App-Id", "app1", "X-App-Token", "s3cret"},
			false, 0, "", caller{project: p1, key: dir.keys["app1:s3cret"], kind: identity.KindApp}},
		{"OAuth refuses a client key", surface{api: apiOAuth}, "/v1/oauth/token", []string{"Authorization", basic("cli1", "public")},
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"a download link alone", file, "/v1/exports/exp_1?token=" + link, nil,
			false, 0, "", caller{project: p1, key: tenancy.AppKey{AppID: "exp_1"}, kind: identity.KindDownload}},
		{"a download link for another export", surface{api: apiApp, exportID: "exp_2", file: true}, "/v1/exports/exp_2?token=" + link, nil,
			false, http.StatusNotFound, "not_found", caller{}},
		{"a download link of a project gone", file, "/v1/exports/exp_1?token=" + strayLink, nil,
			false, http.StatusNotFound, "not_found", caller{}},
		{"a forged download link", file, "/v1/exports/exp_1?token=forged", nil,
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"a link beside keys: the keys decide", file, "/v1/exports/exp_1?token=forged", []string{"X-App-Id", "app1", "X-App-Token", "s3cret"},
			false, 0, "", caller{project: p1, key: dir.keys["app1:s3cret"], kind: identity.KindApp}},
		{"Bearer token with the route's scope", surface{api: apiApp}, "/v1/loyalties/camp_1", []string{"Authorization", "Bearer tok-loyalties"},
			false, 0, "", caller{project: p1, key: tenancy.AppKey{AppID: "app1", ProjectID: "p1", Kind: tenancy.KeyApp}, token: dir.bearers["tok-loyalties"], kind: identity.KindApp}},
		{"Bearer token without the route's scope", surface{api: apiApp}, "/v1/customers", []string{"Authorization", "Bearer tok-loyalties"},
			false, http.StatusForbidden, "missing_scope", caller{}},
		{"unknown Bearer token", surface{api: apiApp}, "/v1/customers", []string{"Authorization", "Bearer nope"},
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"Bearer token on the client-side API", surface{api: apiClient}, "/client/v1/validations", []string{"Authorization", "Bearer tok-client"},
			false, 0, "", caller{project: p1, key: tenancy.AppKey{AppID: "app1", ProjectID: "p1", Kind: tenancy.KeyApp}, token: dir.bearers["tok-client"], kind: identity.KindApp}},
		{"client key on the client-side API", surface{api: apiClient}, "/client/v1/validations", []string{"X-Client-Application-Id", "cli1", "X-Client-Token", "public"},
			false, 0, "", caller{project: p1, key: dir.keys["cli1:public"], kind: identity.KindApp}},
		{"server key on the client-side API", surface{api: apiClient}, "/client/v1/validations", []string{"X-Client-Application-Id", "app1", "X-Client-Token", "s3cret"},
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"server key headers on the client-side API", surface{api: apiClient}, "/client/v1/validations", []string{"X-App-Id", "app1", "X-App-Token", "s3cret"},
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"server key on the application API", surface{api: apiApp}, "/v1/customers", []string{"X-App-Id", "app1", "X-App-Token", "s3cret"},
			false, 0, "", caller{project: p1, key: dir.keys["app1:s3cret"], kind: identity.KindApp}},
		{"client key on the application API", surface{api: apiApp}, "/v1/customers", []string{"X-App-Id", "cli1", "X-App-Token", "public"},
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"no credentials", surface{api: apiApp}, "/v1/customers", nil,
			false, http.StatusUnauthorized, "unauthorized", caller{}},
		{"the directory unreachable", surface{api: apiApp}, "/v1/customers", []string{"X-App-Id", "app1", "X-App-Token", "s3cret"},
			true, http.StatusServiceUnavailable, "", caller{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir.err = nil
			if tc.down {
				dir.err = errors.New("down")
			}
			res := serveStep(t, credentialsStep{keys: dir, links: links}, newReq("GET", tc.path, tc.header...), call{surface: tc.surface})
			if res.code() != tc.code {
				t.Fatalf("answered %d (%s), want %d", res.rec.Code, res.rec.Body, tc.code)
			}
			if tc.errKey != "" && res.key() != tc.errKey {
				t.Fatalf("error %s, want key %s", res.rec.Body, tc.errKey)
			}
			if res.next != nil && !sameCaller(res.next.caller, tc.want) {
				t.Fatalf("caller %+v, want %+v", res.next.caller, tc.want)
			}
		})
	}
}

func sameCaller(a, b caller) bool {
	return a.project.ID == b.project.ID && a.key.AppID == b.key.AppID && a.key.Kind == b.key.Kind && a.kind == b.kind &&
		a.management.ID == b.management.ID && a.token.AppID == b.token.AppID && len(a.token.Scopes) == len(b.token.Scopes)
}
