package identity

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSignVerifyRoundTripAndTamperingIsRefused(t *testing.T) {
	s, err := NewSigner([]byte("0123456789abcdef0123"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	in := Identity{Audience: AudienceRegional, ProjectID: "proj_1", Cluster: "us1", Method: "POST", Path: "/v1/customers",
		Kind: KindApp, KeyID: "app1", Scopes: []string{"api", "loyalties"},
		APIVersion: "v2018-08-01", RequestID: "v-abc", Expires: now.Add(time.Minute), Customer: "ann|42,%x"}
	h := s.Sign(in)
	out, err := s.Verify(h, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if out.ProjectID != in.ProjectID || out.Cluster != in.Cluster || strings.Join(out.Scopes, ",") != "api,loyalties" ||
		out.RequestID != in.RequestID || out.KeyID != "app1" || out.Audience != in.Audience || out.Method != "POST" ||
		out.Path != "/v1/customers" || out.Customer != in.Customer {
		t.Fatalf("round trip: %+v", out)
	}
	cases := map[string]string{
		"empty":          "",
		"no signature":   strings.Split(h, ".")[0],
		"other project":  strings.Replace(h, "proj_1", "proj_2", 1),
		"other cluster":  strings.Replace(h, "|us1|", "|as1|", 1),
		"bad signature":  h[:len(h)-2] + "xx",
		"other secret":   mustSigner(t, "another secret of 16+").Sign(in),
		"expired header": s.Sign(Identity{ProjectID: "p", Expires: now.Add(-time.Second)}),
	}
	for name, header := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Verify(header, "", now); err == nil {
				t.Fatalf("accepted %q", header)
			}
		})
	}
}

// An identity is good for its audience, cluster, method, path and query,
// once for a write, and for seconds.
func TestAnIdentityIsGoodForOneRequest(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	now := time.Now()
	id := Identity{Audience: AudienceRegional, ProjectID: "proj_1", Cluster: "api", Method: "POST", Path: "/v1/customers",
		Kind: KindApp, Expires: now.Add(TTL)}
	req := func(method, path, header string) *http.Request {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set(Header, header)
		return r
	}
	h := s.Sign(id)
	seen := NewSeen(100)
	if _, err := s.VerifyRequest(req("POST", "/v1/customers", h), AudienceRegional, "api", now, seen); err != nil {
		t.Fatalf("the request it was signed for: %v", err)
	}
	for name, c := range map[string]struct {
		r                 *http.Request
		audience, cluster string
		at                time.Time
	}{
		"replayed":           {req("POST", "/v1/customers", h), AudienceRegional, "api", now},
		"another cluster":    {req("POST", "/v1/customers", s.Sign(id)), AudienceRegional, "us1", now},
		"another audience":   {req("POST", "/v1/customers", s.Sign(id)), AudienceOperator, "api", now},
		"another method":     {req("DELETE", "/v1/customers", s.Sign(id)), AudienceRegional, "api", now},
		"another path":       {req("POST", "/v1/orders", s.Sign(id)), AudienceRegional, "api", now},
		"an escaped path":    {req("POST", "/v1/%63ustomers", s.Sign(id)), AudienceRegional, "api", now},
		"a query added":      {req("POST", "/v1/customers?force=true", s.Sign(id)), AudienceRegional, "api", now},
		"seconds later":      {req("POST", "/v1/customers", s.Sign(id)), AudienceRegional, "api", now.Add(TTL + time.Second)},
		"another's secret":   {req("POST", "/v1/customers", mustSigner(t, "another secret of 16+").Sign(id)), AudienceRegional, "api", now},
		"no identity at all": {req("POST", "/v1/customers", ""), AudienceRegional, "api", now},
	} {
		if _, err := s.VerifyRequest(c.r, c.audience, c.cluster, c.at, seen); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// An idempotent request may come twice (a router's retry), with the
	// query it was signed for and no other.
	get := Identity{Audience: AudienceRegional, Cluster: "api", Method: "GET", Path: "/v1/customers",
		Query: "email=ann%40example.com&limit=1", Expires: now.Add(TTL)}
	g := s.Sign(get)
	for i := range 2 {
		got, err := s.VerifyRequest(req("GET", "/v1/customers?email=ann%40example.com&limit=1", g), AudienceRegional, "api", now, seen)
		if err != nil {
			t.Fatalf("GET %d: %v", i+1, err)
		}
		if got.Query != get.Query {
			t.Fatalf("GET %d: query %q", i+1, got.Query)
		}
	}
	for _, other := range []string{"/v1/customers", "/v1/customers?email=bob%40example.com&limit=1",
		"/v1/customers?email=ann%40example.com&limit=100", "/v1/customers?limit=1&email=ann%40example.com"} {
		if _, err := s.VerifyRequest(req("GET", other, g), AudienceRegional, "api", now, seen); err == nil {
			t.Errorf("GET %s: accepted an identity signed for another query", other)
		}
	}
}

func mustSigner(t *testing.T, secret string) *Signer {
	s, err := NewSigner([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func BenchmarkSignVerify(b *testing.B) {
	s := mustSigner(nil, "0123456789abcdef0123")
	id := Identity{ProjectID: "proj_0123456789abcdef012345", Cluster: "api", Kind: KindApp, KeyID: "k", Expires: time.Now().Add(time.Minute)}
	for i := 0; i < b.N; i++ {
		if _, err := s.Verify(s.Sign(id), "", time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// A secret is rotated without downtime: the services verify with the new
// secret and the old one as previous while the router still signs with
// the old, then with the new; once previous is dropped the old secret opens
// nothing. The request binding and replay refusal hold with either secret.
func TestRotationAcceptsThePreviousSecretUntilItIsDropped(t *testing.T) {
	oldS, newS := []byte("old secret 0123456789"), []byte("new secret 0123456789")
	signedOld, signedNew := mustSigner(t, string(oldS)), mustSigner(t, string(newS))
	during, err := NewSigner(newS, oldS)
	if err != nil {
		t.Fatal(err)
	}
	after, err := NewSigner(newS, nil) // previous unset: an empty flag
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	id := Identity{Audience: AudienceRegional, ProjectID: "proj_1", Cluster: "api", Method: "POST", Path: "/v1/customers",
		Kind: KindApp, Expires: now.Add(TTL)}
	req := func(header string) *http.Request {
		r := httptest.NewRequest("POST", "/v1/customers", nil)
		r.Header.Set(Header, header)
		return r
	}
	seen := NewSeen(100)
	for name, h := range map[string]string{"old": signedOld.Sign(id), "new": signedNew.Sign(id)} {
		if _, err := during.VerifyRequest(req(h), AudienceRegional, "api", now, seen); err != nil {
			t.Errorf("during the rotation, signed with the %s secret: %v", name, err)
		}
		if _, err := during.VerifyRequest(req(h), AudienceRegional, "api", now, seen); err == nil {
			t.Errorf("during the rotation, a write signed with the %s secret replayed was accepted", name)
		}
	}
	other := id
	other.Audience = AudienceManagement
	if _, err := during.VerifyRequest(req(signedOld.Sign(other)), AudienceRegional, "api", now, nil); err == nil {
		t.Error("the previous secret's identity for another audience was accepted")
	}
	if _, err := during.VerifyRequest(req(mustSigner(t, "a third secret 0123456").Sign(id)), AudienceRegional, "api", now, nil); err == nil {
		t.Error("an identity of neither secret was accepted")
	}
	if got := during.Sign(id); got != signedNew.Sign(id) {
		t.Error("during the rotation the signer signs with the previous secret")
	}
	if _, err := after.VerifyRequest(req(signedOld.Sign(id)), AudienceRegional, "api", now, nil); err == nil {
		t.Error("with previous dropped, the old secret's identity was accepted")
	}
	if _, err := after.VerifyRequest(req(signedNew.Sign(id)), AudienceRegional, "api", now, nil); err != nil {
		t.Errorf("with previous dropped, the new secret's identity: %v", err)
	}
	if _, err := NewSigner(newS, []byte("short")); err == nil {
		t.Error("a previous secret under 16 bytes was taken")
	}
}
