package engine

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/vouchers"
)

// A LOCK session reserves one redemption of each voucher validated in it
// for the session's key until it expires: other sessions and requests see
// the voucher's quantity less what live sessions hold. Redeeming in the
// session uses its reservation and ends it.

var ttlUnits = map[string]time.Duration{"DAYS": 24 * time.Hour, "HOURS": time.Hour, "MINUTES": time.Minute,
	"SECONDS": time.Second, "MILLISECONDS": time.Millisecond, "MICROSECONDS": time.Microsecond, "NANOSECONDS": 1}

// DefaultSessionTTL is a LOCK session's life when the request gives none.
const DefaultSessionTTL = 7 * 24 * time.Hour

// SessionView is the answer's session object.
type SessionView struct {
	Key     string  `json:"key"`
	Type    string  `json:"type"`
	TTL     float64 `json:"ttl"`
	TTLUnit string  `json:"ttl_unit"`
}

// session is a request's LOCK session: its key (made when not given) and
// when it ends; nil when the request has none.
func session(r *Request, now time.Time) (*SessionView, time.Time) {
	s := r.Session
	if s == nil {
		return nil, time.Time{}
	}
	v := SessionView{Type: "LOCK", TTL: 7, TTLUnit: "DAYS"}
	if s.Key != nil {
		v.Key = *s.Key
	} else {
		v.Key = ids.New("ssn_")
	}
	if s.TTL != nil {
		v.TTL = *s.TTL
	}
	if s.TTLUnit != nil {
		v.TTLUnit = *s.TTLUnit
	}
	d := time.Duration(math.Min(v.TTL*float64(ttlUnits[v.TTLUnit]), float64(365*24*time.Hour)))
	return &v, now.Add(d)
}

// queueHeld queues counting the live reservations of each voucher by
// sessions other than key, into out.
func queueHeld(b *pgx.Batch, projectID string, voucherIDs []string, key string, now time.Time, out map[string]int64) {
	b.Queue(`SELECT voucher_id, count(*) FROM redemption_sessions
		WHERE project_id = $1 AND voucher_id = ANY($2::TEXT[]) AND expires_at > $3 AND session_key <> $4 GROUP BY voucher_id`,
		projectID, voucherIDs, now, key).Query(func(rows pgx.Rows) error {
		var id string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { out[id] = n; return nil })
		return err
	})
}

// holdSessions records the session's reservation of each voucher (renewing
// its expiry), in one statement.
func holdSessions(ctx context.Context, q db.Querier, projectID string, voucherIDs []string, key, customerID string, until time.Time) error {
	if len(voucherIDs) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `INSERT INTO redemption_sessions (project_id, voucher_id, session_key, customer_id, expires_at)
		SELECT $1, v, $3, NULLIF($4, ''), $5 FROM unnest($2::TEXT[]) AS v
		ON CONFLICT (project_id, voucher_id, session_key) DO UPDATE SET expires_at = excluded.expires_at`,
		projectID, voucherIDs, key, customerID, until)
	return err
}

// queueEndSessions ends the session's reservations of vouchers (used by
// its redemption), and sweeps the expired ones of those vouchers.
func queueEndSessions(b *pgx.Batch, projectID string, voucherIDs []string, key string, now time.Time) {
	b.Queue(`DELETE FROM redemption_sessions WHERE project_id = $1 AND voucher_id = ANY($2::TEXT[]) AND (session_key = $3 OR expires_at <= $4)`,
		projectID, voucherIDs, key, now)
}

// releaseSession serves DELETE /v1/vouchers/{code}/sessions/{sessionKey}:
// the session's reservation of the voucher ends.
func (e *Engine) releaseSession(c echo.Context) error {
	ctx, projectID := c.Request().Context(), httpx.ProjectID(c)
	var v vouchers.Found
	b := &pgx.Batch{}
	vouchers.QueueRead(b, projectID, c.Param("code"), false, &v)
	if err := e.pool.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if !v.Found {
		return apierr.NotFound("voucher", c.Param("code"))
	}
	tag, err := e.pool.Exec(ctx, `DELETE FROM redemption_sessions WHERE project_id = $1 AND voucher_id = $2 AND session_key = $3`,
		projectID, v.ID, c.Param("sessionKey"))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return apierr.NotFound("session", c.Param("sessionKey"))
	}
	return c.NoContent(http.StatusNoContent)
}
