package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/tenancy"
)

// Directory is what delivery reads of the tenancy directory.
type Directory interface {
	Project(ctx context.Context, id string) (tenancy.Project, error)
	Webhooks(ctx context.Context, projectID string) ([]tenancy.Webhook, error)
}

// Options of the delivery service.
type Options struct {
	// Timeout bounds one delivery attempt (default 10s).
	Timeout time.Duration
	// AllowPrivateTargets lets webhooks reach loopback and private addresses;
	// off in production, where a target URL must not reach the platform's
	// own network.
	AllowPrivateTargets bool
	// MaxAge is how long a delivery is retried (default 72h).
	MaxAge time.Duration
	// BackoffBase is the first retry delay, doubling (default 10s, capped at 6h).
	BackoffBase time.Duration
	// Claimed, when set, is called as a delivery starts, before it reads
	// its payload afresh and sends: tests hold a delivery there.
	Claimed func(ctx context.Context, projectID, deliveryID string)
}

// Service fans notices out to webhooks and delivers them.
type Service struct {
	pool   *db.Pool
	dir    Directory
	client *http.Client
	o      Options
	// marks are the deliveries asking to mark their sends (sending),
	// served by markers goroutines started at the first.
	marks        chan sendReq
	startMarkers sync.Once
}

// Register adds the fan-out and delivery handlers to reg; pool is the
// regional database, where a delivery marks its send (sending).
func Register(reg *async.Registry, pool *db.Pool, dir Directory, o Options) *Service {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxAge == 0 {
		o.MaxAge = 72 * time.Hour
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = 10 * time.Second
	}
	d := &net.Dialer{Timeout: 5 * time.Second, Control: guard(o.AllowPrivateTargets)}
	s := &Service{pool: pool, dir: dir, o: o, client: &http.Client{
		Timeout: o.Timeout,
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
			TLSHandshakeTimeout: 5 * time.Second, ResponseHeaderTimeout: o.Timeout},
		// A redirect is an answer: the receiver should be configured with its final URL.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	reg.HandleTx(KindEvent, s.fanOut, async.Policy{})
	reg.HandleRecorded(KindDeliver, s.deliver, recordAttempts, async.Policy{MaxAttempts: 1000, MaxAge: o.MaxAge, BackoffBase: o.BackoffBase,
		BackoffCap: 6 * time.Hour})
	return s
}

// guard refuses connections to the platform's own networks.
func guard(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		host, _, _ := net.SplitHostPort(address)
		ip := net.ParseIP(host)
		if ip == nil || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() {
			return fmt.Errorf("webhooks: target address %s is not a public address", host)
		}
		return nil
	}
}

// fanOut creates one delivery per active webhook subscribed to the notice,
// in the transaction that finishes its fan-out task: exactly once.
func (s *Service) fanOut(ctx context.Context, tx pgx.Tx, t async.Task) error {
	var ev eventTask
	if err := json.Unmarshal(t.Payload, &ev); err != nil {
		return fmt.Errorf("webhooks: event payload: %w", err)
	}
	hooks, err := s.dir.Webhooks(ctx, t.ProjectID)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	if err := s.queueDeliveries(ctx, b, t.ProjectID, ev, hooks); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

func (s *Service) queueDeliveries(ctx context.Context, b *pgx.Batch, projectID string, ev eventTask, hooks []tenancy.Webhook) error {
	for _, h := range hooks {
		if !h.Active || !h.Subscribed(ev.Type) {
			continue
		}
		id, err := async.Queue(ctx, b, projectID, async.NewTask{Kind: KindDeliver, MaxAttempts: 1000, MaxAge: s.o.MaxAge,
			Payload: deliveryTask{WebhookID: h.ID, EventID: ev.ID, Body: ev.Body}})
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO webhook_deliveries (project_id, id, webhook_id, event_id, event_type, target_url, status, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'pending', now())`, projectID, id, h.ID, ev.ID, ev.Type, h.TargetURL)
	}
	return nil
}

// deliver POSTs one notice to one webhook. The body it sends is read
// afresh once its send is marked (sending), so a permanent deletion
// committed since the task was claimed has its customer taken out of it,
// and one committed after waits for the send.
func (s *Service) deliver(ctx context.Context, t async.Task) async.Outcome {
	if s.o.Claimed != nil {
		s.o.Claimed(ctx, t.ProjectID, t.ID)
	}
	var d deliveryTask
	if err := json.Unmarshal(t.Payload, &d); err != nil {
		return async.Outcome{Err: fmt.Errorf("webhooks: delivery payload: %w", err)}
	}
	hook, live, err := s.webhook(ctx, t.ProjectID, d.WebhookID)
	if err != nil {
		return async.Outcome{Err: err}
	}
	if !live {
		// Deleted or deactivated since: stop, and say so.
		return async.Outcome{Record: func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'canceled', finished_at = now()
				WHERE project_id = $1 AND webhook_id = $2 AND id = $3`, t.ProjectID, d.WebhookID, t.ID)
			return err
		}}
	}
	project, err := s.dir.Project(ctx, t.ProjectID)
	if err != nil {
		return async.Outcome{Err: err}
	}
	if d.Body, err = s.sending(ctx, t, d.WebhookID); err != nil {
		return async.Outcome{Err: err}
	}
	now := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.TargetURL, strings.NewReader(d.Body))
	if err != nil {
		return async.Outcome{Err: err}
	}
	Sign(req.Header, t.ID, now, []byte(d.Body), project.SigningSecrets(now))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Tally-Webhooks/1")

	start := time.Now()
	res, err := s.client.Do(req)
	elapsed := int(time.Since(start).Milliseconds())
	var code *int
	var failure error
	if err != nil {
		failure = fmt.Errorf("webhooks: POST %s: %w", hook.TargetURL, err)
	} else {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		code = &res.StatusCode
		if res.StatusCode < 200 || res.StatusCode > 299 {
			failure = fmt.Errorf("webhooks: POST %s answered %d", hook.TargetURL, res.StatusCode)
		}
	}
	a := attemptNote{webhookID: d.WebhookID, code: code, elapsed: elapsed, at: start}
	if failure != nil {
		msg := failure.Error()
		a.err = &msg
	}
	return async.Outcome{Err: failure, Note: a}
}

// attemptNote is what one delivery attempt leaves.
type attemptNote struct {
	webhookID string
	code      *int
	err       *string
	elapsed   int
	at        time.Time
}

// recordAttempts queues, for each attempt, its row and its delivery's new state.
func recordAttempts(b *pgx.Batch, tries []async.Try) {
	for _, t := range tries {
		a, ok := t.Note.(attemptNote)
		if !ok {
			continue // the try failed before any request was sent
		}
		b.Queue(`INSERT INTO webhook_attempts (project_id, delivery_id, attempt, status_code, error, duration_ms, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (project_id, delivery_id, attempt) DO NOTHING`,
			t.Task.ProjectID, t.Task.ID, t.Task.Attempt, a.code, a.err, a.elapsed, a.at)
		status := "pending"
		if t.Err == nil {
			status = "delivered"
		}
		// The webhook id too: with it both indexes pin the row, and a
		// planner misled by young statistics cannot pick the by-webhook
		// index and walk a project's deliveries to find one.
		b.Queue(`UPDATE webhook_deliveries SET attempts = $4, last_status_code = $5, status = $6, sending_until = NULL,
			finished_at = CASE WHEN $6 = 'delivered' THEN now() ELSE NULL END
			WHERE project_id = $1 AND webhook_id = $2 AND id = $3`,
			t.Task.ProjectID, a.webhookID, t.Task.ID, t.Task.Attempt, a.code, status)
	}
}

func (s *Service) webhook(ctx context.Context, projectID, id string) (tenancy.Webhook, bool, error) {
	hooks, err := s.dir.Webhooks(ctx, projectID)
	if err != nil {
		return tenancy.Webhook{}, false, err
	}
	for _, h := range hooks {
		if h.ID == id {
			return h, h.Active, nil
		}
	}
	return tenancy.Webhook{}, false, nil
}

// Sign sets the signature headers of a webhook request: X-Voucherify-Signature
// (hex HMAC-SHA256 of the exact body, keyed with the current secret, as the
// existing SDKs verify) and the Standard Webhooks webhook-id,
// webhook-timestamp and webhook-signature (one v1 signature per secret in use,
// over id.timestamp.body), against replays.
func Sign(h http.Header, id string, now time.Time, body []byte, secrets []string) {
	mac := hmac.New(sha256.New, []byte(secrets[0]))
	mac.Write(body)
	h.Set("X-Voucherify-Signature", hex.EncodeToString(mac.Sum(nil)))
	ts := strconv.FormatInt(now.Unix(), 10)
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	var sigs []string
	for _, s := range secrets {
		m := hmac.New(sha256.New, StandardKey(s))
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	h.Set("webhook-signature", strings.Join(sigs, " "))
}

// StandardKey is the Standard Webhooks key of a secret: the base64 after "whsec_".
func StandardKey(secret string) []byte {
	if k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err == nil {
		return k
	}
	return []byte(secret)
}

// Verify checks both kinds of signature the way a receiver would, with a
// tolerance for the timestamp; receivers and tests use it.
func Verify(h http.Header, body []byte, secret string, now time.Time, tolerance time.Duration) error {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	if !hmac.Equal([]byte(h.Get("X-Voucherify-Signature")), []byte(hex.EncodeToString(mac.Sum(nil)))) {
		return errors.New("X-Voucherify-Signature does not match")
	}
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp missing")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return errors.New("webhook-timestamp outside the tolerance: a replay?")
	}
	m := hmac.New(sha256.New, StandardKey(secret))
	m.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	m.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("webhook-signature does not match")
}
