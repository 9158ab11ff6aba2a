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
	"encoding/binary"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// Header carries the signed identity from the router to a service.
const Header = "X-Tally-Identity"

// Audiences: the service an identity is signed for. The router signs for
// regional instances and for management; management signs operator calls
// (regional's /internal endpoints) with a credential of their own.
const (
	AudienceRegional   = "regional"
	AudienceManagement = "management"
	AudienceOperator   = "operator"
)

// Credential kinds.
const (
	KindApp        = "app"        // server-side application keys
	KindClient     = "client"     // client-side keys (browser, mobile)
	KindManagement = "management" // management keys (platform admins)
	// KindDownload is a signed download link's bearer: good for reading
	// the one export the link names (KeyID), nothing else.
	KindDownload = "download"
)

// Identity is what the router vouches for. It is good for one request:
// its audience, cluster, method, path and query, for seconds (TTL).
type Identity struct {
	Audience  string
	ProjectID string // empty for management calls
	Cluster   string // the cluster the request was addressed to
	Method    string
	Path      string // as sent upstream, escaped (URL.EscapedPath)
	// Query is the raw query as sent upstream. It is signed but not
	// carried: the service MACs the query it received, so the header is
	// good for no other query on the same path.
	Query      string
	Kind       string
	KeyID      string // the X-App-Id or X-Management-Id used
	Scopes     []string
	APIVersion string
	RequestID  string
	Expires    time.Time
	// Customer binds a client-side request to one customer (a source_id
	// or id): a token minted for a browser acts for no one else.
	Customer string
}

// TTL bounds how long a signed header is good for. The router signs as it
// forwards and the service verifies as the headers arrive, before any body,
// so seconds cover clock skew between hosts; a captured header is
// worthless soon after, and never good for another request.
const TTL = 10 * time.Second

const version = "v4"

// Signer signs identities with one secret and verifies them with it or,
// during a rotation, with the secret it replaces.
type Signer struct {
	pool sync.Pool
	// previous verifies what was signed with the secret being rotated
	// out: the services take the new secret first, while the router still
	// signs with the old one (see NewSigner).
	previous *Signer
}

// NewSigner returns a signer for secret, which must be at least 16 bytes.
// A previous secret, when given and not empty, is accepted too but never
// signs: a secret is rotated without downtime by giving the verifying
// services the new secret with the old one as previous, then the signer
// the new secret, then dropping previous.
func NewSigner(secret []byte, previous ...[]byte) (*Signer, error) {
	if len(secret) < 16 {
		return nil, errors.New("identity: the secret must be at least 16 bytes")
	}
	s := newSigner(secret)
	for _, p := range previous {
		if len(p) == 0 {
			continue
		}
		if s.previous != nil {
			return nil, errors.New("identity: one previous secret at most")
		}
		if len(p) < 16 {
			return nil, errors.New("identity: the previous secret must be at least 16 bytes")
		}
		s.previous = newSigner(p)
	}
	return s, nil
}

func newSigner(secret []byte) *Signer {
	key := append([]byte(nil), secret...)
	s := &Signer{}
	s.pool.New = func() any { return hmac.New(sha256.New, key) }
	return s
}

var errInvalid = errors.New("identity: invalid or missing identity header")

// Sign renders id as a header value. Fields must not contain '|' (the
// customer, which may, is escaped).
func (s *Signer) Sign(id Identity) string {
	fields := [...]string{id.Audience, id.ProjectID, id.Cluster, id.Method, id.Path, id.Kind, id.KeyID,
		strings.Join(id.Scopes, ","), id.APIVersion, id.RequestID, strconv.FormatInt(id.Expires.Unix(), 10),
		url.QueryEscape(id.Customer)}
	n := len(version) + len(fields) + 1 + base64.RawURLEncoding.EncodedLen(sha256.Size)
	for _, f := range fields {
		n += len(f)
	}
	// One buffer of the header's exact size: payload, dot, signature.
	b := make([]byte, 0, n)
	b = append(b, version...)
	for _, f := range fields {
		b = append(b, '|')
		b = append(b, f...)
	}
	sig := s.sum(b, id.Query)
	b = append(b, '.')
	b = base64.RawURLEncoding.AppendEncode(b, sig[:])
	return string(b)
}

func (s *Signer) mac(payload, query string) string {
	sum := s.sum([]byte(payload), query)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// sum is the MAC of the header's payload, after its length (so that no
// byte can move between the two), and of the query it was signed for.
func (s *Signer) sum(payload []byte, query string) [sha256.Size]byte {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(payload)))
	h.Write(n[:])
	h.Write(payload)
	io.WriteString(h, query)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	s.pool.Put(h)
	return sum
}

// Verify checks a header value, signed for query, and returns the
// identity it carries.
func (s *Signer) Verify(header, query string, now time.Time) (Identity, error) {
	dot := strings.LastIndexByte(header, '.')
	if dot < 0 {
		return Identity{}, errInvalid
	}
	payload, sig := header[:dot], header[dot+1:]
	if !hmac.Equal([]byte(sig), []byte(s.mac(payload, query))) &&
		(s.previous == nil || !hmac.Equal([]byte(sig), []byte(s.previous.mac(payload, query)))) {
		return Identity{}, errInvalid
	}
	f := strings.Split(payload, "|")
	if len(f) != 13 || f[0] != version {
		return Identity{}, errInvalid
	}
	exp, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil || now.Unix() > exp {
		return Identity{}, errors.New("identity: expired identity header")
	}
	customer, err := url.QueryUnescape(f[12])
	if err != nil {
		return Identity{}, errInvalid
	}
	id := Identity{Audience: f[1], ProjectID: f[2], Cluster: f[3], Method: f[4], Path: f[5], Kind: f[6], KeyID: f[7],
		Query: query, APIVersion: f[9], RequestID: f[10], Expires: time.Unix(exp, 0), Customer: customer}
	if f[8] != "" {
		id.Scopes = strings.Split(f[8], ",")
	}
	return id, nil
}

// Signature is the MAC part of a signed header: what a replay repeats.
func Signature(header string) string { return header[strings.LastIndexByte(header, '.')+1:] }

// VerifyRequest verifies r's identity header for audience and, when
// cluster is not empty, for that cluster: the identity must have been
// signed for r's method, path and query. seen, when set, refuses a signature
// already presented (a replay) for a method that is not idempotent.
func (s *Signer) VerifyRequest(r *http.Request, audience, cluster string, now time.Time, seen *Seen) (Identity, error) {
	h := r.Header.Get(Header)
	id, err := s.Verify(h, r.URL.RawQuery, now)
	if err != nil {
		return id, err
	}
	switch {
	case id.Audience != audience:
		return Identity{}, errors.New("identity: signed for another audience")
	case cluster != "" && id.Cluster != cluster:
		return Identity{}, errors.New("identity: signed for another cluster")
	case id.Method != r.Method || id.Path != r.URL.EscapedPath():
		return Identity{}, errors.New("identity: signed for another request")
	}
	if seen != nil && !idempotent(r.Method) && !seen.first(Signature(h)) {
		return Identity{}, errors.New("identity: replayed")
	}
	return id, nil
}

// idempotent methods may be sent twice (a router retries them), so their
// identities are not remembered.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// Seen remembers the signatures presented until they expire (with 5 s of
// clock skew), so that each is accepted once by a service instance. Past
// size signatures within that window (thousands of writes a second) the
// oldest are forgotten early.
type Seen struct {
	mu  sync.Mutex
	lru *expirable.LRU[string, struct{}]
}

// NewSeen remembers up to size signatures.
func NewSeen(size int) *Seen {
	return &Seen{lru: expirable.NewLRU[string, struct{}](size, nil, TTL+5*time.Second)}
}

func (s *Seen) first(sig string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lru.Contains(sig) {
		return false
	}
	s.lru.Add(sig, struct{}{})
	return true
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
