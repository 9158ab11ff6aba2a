package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/tallyhq/tally/internal/telemetry"
)

// parse reads flags, then fills every flag not given on the command line
// from its TALLY_* environment variable (--tenancy-url ↔ TALLY_TENANCY_URL).
func parse(fs *flag.FlagSet, args []string) error {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage += " (env " + envName(f.Name) + ")"
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", envName(f.Name), e)
			}
		}
	})
	return err
}

func envName(flagName string) string {
	return "TALLY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func logger() *slog.Logger {
	level := slog.LevelInfo
	_ = level.UnmarshalText([]byte(os.Getenv("TALLY_LOG_LEVEL")))
	l := telemetry.NewLogger(os.Stderr, level)
	slog.SetDefault(l)
	return l
}

// secret decodes the identity secret: hex, at least 16 bytes.
func secret(s string) ([]byte, error) {
	return hexSecret("identity-secret", s, "the same hex secret on router, regional and management")
}

// operatorSecret is management's credential for regional's /internal
// endpoints, which must differ from the identity secret.
func operatorSecret(s string, identity []byte) ([]byte, error) {
	b, err := hexSecret("operator-secret", s, "the same hex secret on management and regional, other than the identity secret")
	if err == nil && string(b) == string(identity) {
		return nil, errors.New("--operator-secret must differ from --identity-secret: it is a credential of its own")
	}
	return b, err
}

// previousSecret decodes a secret being rotated out (--identity-secret-
// previous, --operator-secret-previous): optional, accepted besides the
// current one but never used to sign, so the verifying services can take
// a new secret before the signer does. current is the secret it rotates
// with, others those it must not equal (the operator secret is not an
// identity secret).
func previousSecret(flag, s string, current []byte, others ...[]byte) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := hexSecret(flag, s, "")
	if err != nil {
		return nil, err
	}
	if string(b) == string(current) {
		return nil, fmt.Errorf("--%s equals the current secret: give the old one, or leave it empty once the rotation is done", flag)
	}
	for _, o := range others {
		if len(o) > 0 && string(b) == string(o) {
			return nil, fmt.Errorf("--%s must differ from the other secret: an identity secret is never an operator secret", flag)
		}
	}
	return b, nil
}

// secretFlags are the secrets of a service behind the router (regional,
// management): the identity secret it verifies the identity header with,
// the operator secret of management's calls of regional's /internal, and
// during a rotation the old ones still accepted. Both services read and
// check them the same way, so a rule about secrets holds for both.
type secretFlags struct {
	identity, identityPrevious, operator *string
	operatorPrevious                     *string // nil: the service signs with the operator secret, so it never verifies an old one
}

// secrets are secretFlags decoded.
type secrets struct {
	identity, identityPrevious, operator, operatorPrevious []byte
}

// behindRouterSecretFlags declares the secret flags on fs; operatorUsage
// says what the operator secret is to this service, and verifiesOperator
// adds --operator-secret-previous for the one that verifies it.
func behindRouterSecretFlags(fs *flag.FlagSet, operatorUsage string, verifiesOperator bool) secretFlags {
	f := secretFlags{
		identity:         fs.String("identity-secret", "", "hex secret verifying the identity header"),
		identityPrevious: fs.String("identity-secret-previous", "", "during a rotation, the old identity secret, still accepted (optional)"),
		operator:         fs.String("operator-secret", "", operatorUsage),
	}
	if verifiesOperator {
		f.operatorPrevious = fs.String("operator-secret-previous", "", "during a rotation, the old operator secret, still accepted (optional)")
	}
	return f
}

// decode checks the secrets given: each present one hex, the operator
// secret other than the identity secret, and an old one neither its
// current secret nor the other kind.
func (f secretFlags) decode() (secrets, error) {
	var s secrets
	var err error
	if s.identity, err = secret(*f.identity); err != nil {
		return s, err
	}
	if s.operator, err = operatorSecret(*f.operator, s.identity); err != nil {
		return s, err
	}
	if s.identityPrevious, err = previousSecret("identity-secret-previous", *f.identityPrevious, s.identity, s.operator); err != nil {
		return s, err
	}
	if f.operatorPrevious != nil {
		s.operatorPrevious, err = previousSecret("operator-secret-previous", *f.operatorPrevious, s.operator, s.identity, s.identityPrevious)
	}
	return s, err
}

func hexSecret(flag, s, what string) ([]byte, error) {
	env := "TALLY_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
	if s == "" {
		return nil, fmt.Errorf("--%s (%s) is required: %s", flag, env, what)
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) < 16 {
		return nil, fmt.Errorf("--%s must be at least 32 hex digits (16 bytes)", flag)
	}
	return b, nil
}

func prefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			a, err := netip.ParseAddr(p)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %w", p, err)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		pr, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", p, err)
		}
		out = append(out, pr)
	}
	return out, nil
}

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
