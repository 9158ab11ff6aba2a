// Package identity is the signed header by which the router tells regional
// and management instances who is calling. Those services trust only it and
// never read raw credential headers: the router resolves credentials once and
// signs the result with an internal secret (HMAC-SHA256).
package identity

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header carries the signed identity from the router to a service.
const Header = "X-Tally-Identity"

// Credential kinds.
const (
	KindApp        = "app"        // server-side application keys
	KindClient     = "client"     // client-side keys (browser, mobile)
	KindManagement = "management" // management keys (platform admins)
)

// Identity is what the router vouches for.
type Identity struct {
	ProjectID  string // empty for management calls
	Cluster    string // the cluster the request was addressed to
	Kind       string
	KeyID      string // the X-App-Id or X-Management-Id used
	Scopes     []string
	APIVersion string
	RequestID  string
	Expires    time.Time
}

// TTL bounds how long a signed header is good for: long enough for a slow
// upload, short enough that a captured header is soon worthless.
const TTL = 5 * time.Minute

const version = "v1"

// Signer signs and verifies identities with one secret.
type Signer struct {
	pool sync.Pool
}

// NewSigner returns a signer for secret, which must be at least 16 bytes.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < 16 {
		return nil, errors.New("identity: the secret must be at least 16 bytes")
	}
	key := append([]byte(nil), secret...)
	s := &Signer{}
	s.pool.New = func() any { return hmac.New(sha256.New, key) }
	return s, nil
}

var errInvalid = errors.New("identity: invalid or missing identity header")

// Sign renders id as a header value. Fields must not contain '|'.
func (s *Signer) Sign(id Identity) string {
	var b strings.Builder
	b.Grow(160)
	b.WriteString(version)
	for _, f := range [...]string{id.ProjectID, id.Cluster, id.Kind, id.KeyID, strings.Join(id.Scopes, ","),
		id.APIVersion, id.RequestID, strconv.FormatInt(id.Expires.Unix(), 10)} {
		b.WriteByte('|')
		b.WriteString(f)
	}
	payload := b.String()
	return payload + "." + s.mac(payload)
}

func (s *Signer) mac(payload string) string {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(payload))
	var sum [sha256.Size]byte
	out := base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
	s.pool.Put(h)
	return out
}

// Verify checks a header value and returns the identity it carries.
func (s *Signer) Verify(header string, now time.Time) (Identity, error) {
	dot := strings.LastIndexByte(header, '.')
	if dot < 0 {
		return Identity{}, errInvalid
	}
	payload, sig := header[:dot], header[dot+1:]
	if !hmac.Equal([]byte(sig), []byte(s.mac(payload))) {
		return Identity{}, errInvalid
	}
	f := strings.Split(payload, "|")
	if len(f) != 9 || f[0] != version {
		return Identity{}, errInvalid
	}
	exp, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil || now.Unix() > exp {
		return Identity{}, errors.New("identity: expired identity header")
	}
	id := Identity{ProjectID: f[1], Cluster: f[2], Kind: f[3], KeyID: f[4], APIVersion: f[6], RequestID: f[7],
		Expires: time.Unix(exp, 0)}
	if f[5] != "" {
		id.Scopes = strings.Split(f[5], ",")
	}
	return id, nil
}

type ctxKey struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the identity in ctx; ok is false when there is none.
func From(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(Identity)
	return id, ok
}
