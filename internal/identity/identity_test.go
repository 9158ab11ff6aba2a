package identity

import (
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
	in := Identity{ProjectID: "proj_1", Cluster: "us1", Kind: KindApp, KeyID: "app1", Scopes: []string{"api", "loyalties"},
		APIVersion: "v2018-08-01", RequestID: "v-abc", Expires: now.Add(time.Minute)}
	h := s.Sign(in)
	out, err := s.Verify(h, now)
	if err != nil {
		t.Fatal(err)
	}
	if out.ProjectID != in.ProjectID || out.Cluster != in.Cluster || strings.Join(out.Scopes, ",") != "api,loyalties" ||
		out.RequestID != in.RequestID || out.KeyID != "app1" {
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
			if _, err := s.Verify(header, now); err == nil {
				t.Fatalf("accepted %q", header)
			}
		})
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
		if _, err := s.Verify(s.Sign(id), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
