// Package dltoken makes and checks the capabilities in export download
// links: `?token=…` on GET /v1/exports/{id}, good alone, as a browser link,
// for reading that one export of that one project until it expires.
//
// A token is base64url("project\nexport\nunix-expiry") "." base64url(MAC),
// the MAC an HMAC-SHA256 under a key derived from the platform's identity
// secret, which the router and the regional services share: the router
// checks a token without a lookup, and the service checks it again.
package dltoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is a token that is malformed, forged or expired.
var ErrInvalid = errors.New("dltoken: invalid or expired download token")

// Keys signs and checks tokens.
type Keys struct {
	key []byte
	// previous checks the tokens made with the identity secret being
	// rotated out (it signs none).
	previous []byte
}

// New derives the token key from the platform's identity secret; the
// derivation keeps a token from ever passing for an identity or the reverse.
// A previous identity secret, when given and not empty, is accepted too:
// links made before a rotation stay good while it lasts.
func New(identitySecret []byte, previous ...[]byte) Keys {
	k := Keys{key: derive(identitySecret)}
	for _, p := range previous {
		if len(p) > 0 {
			k.previous = derive(p)
		}
	}
	return k
}

func derive(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("tally export download token v1"))
	return m.Sum(nil)
}

var enc = base64.RawURLEncoding

// Sign returns a token for reading export of project until expires.
func (k Keys) Sign(project, export string, expires time.Time) string {
	payload := enc.EncodeToString([]byte(project + "\n" + export + "\n" + strconv.FormatInt(expires.Unix(), 10)))
	return payload + "." + enc.EncodeToString(mac(k.key, payload))
}

func mac(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Verify returns the project and export a token is good for at now.
func (k Keys) Verify(token string, now time.Time) (project, export string, err error) {
	if len(token) > 512 {
		return "", "", ErrInvalid
	}
	payload, sig, ok := strings.Cut(token, ".")
	if !ok {
		return "", "", ErrInvalid
	}
	got, err := enc.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(k.key, payload)) && (k.previous == nil || !hmac.Equal(got, mac(k.previous, payload))) {
		return "", "", ErrInvalid
	}
	raw, err := enc.DecodeString(payload)
	if err != nil {
		return "", "", ErrInvalid
	}
	f := strings.Split(string(raw), "\n")
	if len(f) != 3 || f[0] == "" || f[1] == "" {
		return "", "", ErrInvalid
	}
	exp, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return "", "", ErrInvalid
	}
	return f[0], f[1], nil
}
