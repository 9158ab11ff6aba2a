package main

import (
	"context"
	"flag"
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

// The router refuses to start, before it reads the directory, on a TLS
// directory from which no certificate loads, and on a redirect listener
// without TLS to redirect to.
func TestRouterRefusesTLSFlagsThatCannotServe(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--identity-secret", strings.Repeat("ab", 16), "--tenancy-url", "postgres://127.0.0.1:1/none", "--addr", "127.0.0.1:0", "--admin-addr", ""}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"an empty TLS directory":      {[]string{"--tls-dir", dir}, "no certificate loads"},
		"a TLS directory not there":   {[]string{"--tls-dir", dir + "/missing"}, "no such file"},
		"a redirect listener, no TLS": {[]string{"--redirect-addr", "127.0.0.1:0"}, "--tls-dir"},
	} {
		err := runRouter(context.Background(), append(append([]string(nil), base...), c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// Regional and management read their secrets through the same flags: both
// refuse an operator secret equal to the identity secret, and only
// regional, which verifies management's calls, takes the old operator
// secret, never equal to an identity secret.
func TestServicesBehindTheRouterCheckTheirSecretsAlike(t *testing.T) {
	id, op, old := strings.Repeat("ab", 16), strings.Repeat("cd", 16), strings.Repeat("01", 16)
	for _, verifiesOperator := range []bool{true, false} {
		fs := flag.NewFlagSet("service", flag.ContinueOnError)
		f := behindRouterSecretFlags(fs, "operator", verifiesOperator)
		if (fs.Lookup("operator-secret-previous") != nil) != verifiesOperator {
			t.Errorf("verifies the operator secret %v: --operator-secret-previous declared %v", verifiesOperator, !verifiesOperator)
		}
		if err := fs.Parse([]string{"--identity-secret", id, "--operator-secret", id}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.decode(); err == nil || !strings.Contains(err.Error(), "--operator-secret") {
			t.Errorf("verifies the operator secret %v: the identity secret as operator secret: %v, want refused", verifiesOperator, err)
		}
	}
	fs := flag.NewFlagSet("regional", flag.ContinueOnError)
	f := behindRouterSecretFlags(fs, "operator", true)
	if err := fs.Parse([]string{"--identity-secret", id, "--operator-secret", op, "--identity-secret-previous", old}); err != nil {
		t.Fatal(err)
	}
	s, err := f.decode()
	if err != nil || len(s.identity) != 16 || len(s.operator) != 16 || len(s.identityPrevious) != 16 || s.operatorPrevious != nil {
		t.Errorf("secrets %+v, %v: want the three given and no old operator secret", s, err)
	}
	*f.operatorPrevious = old
	if _, err := f.decode(); err == nil || !strings.Contains(err.Error(), "--operator-secret-previous") {
		t.Errorf("the old identity secret as old operator secret: %v, want refused", err)
	}
}
