package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
)

// OAuth access tokens are issued to an application key for TokenLifetime,
// at most MaxTokens live per project.
const (
	TokenLifetime = 900 * time.Second
	MaxTokens     = 1000
	ChangeToken   = "oauth_token" // key: the token's hash
)

// Errors of tokens.
var (
	ErrTooManyTokens = errors.New("tenancy: the project has the most live access tokens allowed")
	ErrTokenNotFound = errors.New("tenancy: no such live access token")
)

// Token is an OAuth access token as stored (its hash, never itself).
type Token struct {
	Hash      string
	ProjectID string
	AppID     string
	Scopes    []string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt *time.Time
	Binding
}

// Binding narrows a client-side token, minted by the merchant's server for
// a browser: the client-side API then serves it only from Origin, and only
// for Customer (a customer's source_id or id). Empty fields bind nothing.
type Binding struct {
	Customer string
	Origin   string
}

// Live says whether the token is good at now.
func (t Token) Live(now time.Time) bool { return t.RevokedAt == nil && now.Before(t.ExpiresAt) }

// TokenHash is the stored form of a token.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// CreateToken issues a token to key for scopes, bound by b, if the project
// has fewer than MaxTokens live. Run it in a SERIALIZABLE transaction
// (db.InTx): two issues that each count the project's live tokens and each
// add one are a write skew the database refuses (one retries and counts
// again), so concurrent issues cannot pass MaxTokens. No lock is taken on
// the project's row: on CockroachDB projects is a GLOBAL table, whose
// writes wait out the cluster's clock uncertainty in every region, and a
// lock there made every token issue of the platform queue on it.
func CreateToken(ctx context.Context, q db.Querier, key AppKey, scopes []string, b Binding, now time.Time) (string, Token, error) {
	var live int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM oauth_tokens WHERE project_id = $1 AND expires_at > $2 AND revoked_at IS NULL`,
		key.ProjectID, now).Scan(&live); err != nil {
		return "", Token{}, err
	}
	if live >= MaxTokens {
		return "", Token{}, ErrTooManyTokens
	}
	token := ids.Secret(32)
	t := Token{Hash: TokenHash(token), ProjectID: key.ProjectID, AppID: key.AppID, Scopes: scopes, CreatedAt: now,
		ExpiresAt: now.Add(TokenLifetime).Truncate(time.Second), Binding: b}
	_, err := q.Exec(ctx, `INSERT INTO oauth_tokens (token_hash, project_id, app_id, scopes, created_at, expires_at, customer, origin)
		VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), NULLIF($8, ''))`, t.Hash, t.ProjectID, t.AppID, strings.Join(scopes, " "),
		t.CreatedAt, t.ExpiresAt, b.Customer, b.Origin)
	return token, t, err
}

// GetToken reads a token by its hash, live or not.
func GetToken(ctx context.Context, q db.Querier, hash string) (Token, error) {
	var t Token
	var scopes string
	err := q.QueryRow(ctx, `SELECT token_hash, project_id, app_id, scopes, created_at, expires_at, revoked_at,
		COALESCE(customer, ''), COALESCE(origin, '') FROM oauth_tokens WHERE token_hash = $1`, hash).Scan(&t.Hash, &t.ProjectID,
		&t.AppID, &scopes, &t.CreatedAt, &t.ExpiresAt, &t.RevokedAt, &t.Customer, &t.Origin)
	if errors.Is(err, db.ErrNotFound) {
		return Token{}, ErrTokenNotFound
	}
	t.Scopes = strings.Fields(scopes)
	return t, err
}

// RevokeToken revokes a project's live token: ErrTokenNotFound when it has
// no such token live.
func RevokeToken(ctx context.Context, q db.Querier, projectID, hash string, now time.Time) error {
	return writeOne(ctx, q, ErrTokenNotFound, Change{Kind: ChangeToken, Key: hash}, `UPDATE oauth_tokens SET revoked_at = $3
		WHERE token_hash = $1 AND project_id = $2 AND revoked_at IS NULL AND expires_at > $3`, hash, projectID, now)
}

// DropExpiredTokens deletes the tokens that expired before cutoff, at most
// batch (db.SweepBatch when 0) in each statement (db.Sweep, in the order of
// oauth_tokens_by_expiry); run it on a pool.
func DropExpiredTokens(ctx context.Context, q db.Querier, cutoff time.Time, batch int) (db.Swept, error) {
	return db.Sweep{Table: "oauth_tokens", Where: `expires_at < $1`, Args: []any{cutoff},
		Order: []string{"expires_at", "token_hash"}, Key: []string{"token_hash"}, Batch: batch}.Run(ctx, q)
}
