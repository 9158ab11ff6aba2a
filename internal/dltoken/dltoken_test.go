package dltoken

import (
	"strings"
	"testing"
	"time"
)

func TestATokenIsGoodForItsExportUntilItExpires(t *testing.T) {
	k := New([]byte("0123456789abcdef0123456789abcdef"))
	now := time.Unix(1_800_000_000, 0)
	tok := k.Sign("proj_1", "exp_1", now.Add(time.Hour))
	p, e, err := k.Verify(tok, now)
	if err != nil || p != "proj_1" || e != "exp_1" {
		t.Fatalf("Verify = %q %q %v", p, e, err)
	}
	if _, _, err := k.Verify(tok, now.Add(time.Hour)); err != ErrInvalid {
		t.Fatalf("an expired token passed: %v", err)
	}
	other := New([]byte("another secret, another platform"))
	if _, _, err := other.Verify(tok, now); err != ErrInvalid {
		t.Fatalf("a token of another key passed: %v", err)
	}
	// A payload changed to name another export, with the MAC kept.
	payload, sig, _ := strings.Cut(tok, ".")
	forged := enc.EncodeToString([]byte("proj_1\nexp_2\n1800003600")) + "." + sig
	if _, _, err := k.Verify(forged, now); err != ErrInvalid || payload == forged {
		t.Fatalf("a forged token passed: %v", err)
	}
	for _, bad := range []string{"", ".", "abc", tok + "x", "x" + tok, strings.Repeat("a", 600)} {
		if _, _, err := k.Verify(bad, now); err != ErrInvalid {
			t.Fatalf("Verify(%q) = %v", bad, err)
		}
	}
}

// During a rotation of the identity secret a link made with either secret
// is good; made with the new one, it is good once previous is dropped.
func TestTokensOfThePreviousSecretAreGoodDuringARotation(t *testing.T) {
	oldS, newS := []byte("old identity secret 0123456789"), []byte("new identity secret 0123456789")
	now := time.Unix(1_800_000_000, 0)
	during := New(newS, oldS)
	for name, tok := range map[string]string{"old": New(oldS).Sign("p", "e", now.Add(time.Hour)), "new": New(newS).Sign("p", "e", now.Add(time.Hour))} {
		if _, _, err := during.Verify(tok, now); err != nil {
			t.Errorf("a token of the %s secret during the rotation: %v", name, err)
		}
	}
	if tok := during.Sign("p", "e", now.Add(time.Hour)); func() error { _, _, err := New(newS).Verify(tok, now); return err }() != nil {
		t.Error("during the rotation a token is made with the previous secret")
	}
	if _, _, err := New(newS, nil).Verify(New(oldS).Sign("p", "e", now.Add(time.Hour)), now); err != ErrInvalid {
		t.Errorf("with previous dropped, a token of the old secret: %v", err)
	}
}
