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
