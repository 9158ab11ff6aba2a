package main

import (
	"strings"
	"testing"
)

// A previous secret is optional, hex like the current one, and never the
// current secret itself nor the other kind of secret (an operator secret
// is not an identity secret).
func TestPreviousSecretIsOptionalAndNeverTheCurrentOrTheOtherKind(t *testing.T) {
	cur, _ := hexSecret("identity-secret", strings.Repeat("ab", 16), "")
	op, _ := hexSecret("operator-secret", strings.Repeat("cd", 16), "")
	if b, err := previousSecret("identity-secret-previous", "", cur, op); b != nil || err != nil {
		t.Errorf("unset: %x %v, want none", b, err)
	}
	if b, err := previousSecret("identity-secret-previous", strings.Repeat("01", 16), cur, op); err != nil || len(b) != 16 {
		t.Errorf("an old secret: %x %v", b, err)
	}
	for name, v := range map[string]string{
		"not hex":            "zz" + strings.Repeat("01", 16),
		"short":              "0102",
		"the current secret": strings.Repeat("ab", 16),
		"the other kind":     strings.Repeat("cd", 16),
	} {
		if _, err := previousSecret("identity-secret-previous", v, cur, op); err == nil || !strings.Contains(err.Error(), "--identity-secret-previous") {
			t.Errorf("%s: %v, want an error naming the flag", name, err)
		}
	}
}
