package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/runtimex"
	"github.com/tallyhq/tally/regional/async"
)

// sendSlack is how much longer than Timeout a delivery's mark lasts: the
// payload's fresh read before the request, and its attempt's record after.
const sendSlack = 5 * time.Second

// skewSlack is how much later than a deletion's first look a mark may be
// stamped and still be waited for: the clocks of a CockroachDB cluster's
// nodes differ by up to its maximum offset (500 ms by default).
const skewSlack = time.Second

// sendReq is a delivery's request to mark its send and read its body.
type sendReq struct {
	t         async.Task
	webhookID string
	out       chan sendRes
}

type sendRes struct {
	body string
	err  error
}

// markers is how many batches of marks are made at once: a batch is two
// round trips whatever its size.
const markers = 4

// sending marks delivery t (of webhook webhookID) as sending until its
// attempt is recorded (recordAttempts clears the mark) or Timeout and
// sendSlack have passed, commits that, and only then reads the body it
// sends afresh (async.Current): redacted by every permanent deletion that
// committed before the read, the customer's data taken out. A deletion
// that commits after the read finds the mark (AwaitSends) and waits for
// the send before it answers. No transaction is held across the request:
// the marks are a statement each, committed before the reads. The
// deliveries that ask at once are marked and read together (mark), one
// commit and two round trips for all. On a failure the delivery is tried
// again later, unsent.
func (s *Service) sending(ctx context.Context, t async.Task, webhookID string) (string, error) {
	s.startMarkers.Do(func() {
		s.marks = make(chan sendReq, 256)
		for range markers {
			go s.mark()
		}
	})
	r := sendReq{t: t, webhookID: webhookID, out: make(chan sendRes, 1)}
	select {
	case s.marks <- r:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	res := <-r.out
	return res.body, res.err
}

// mark serves the requests of sending a batch at a time: whatever has
// arrived, up to 64.
func (s *Service) mark() {
	for r := range s.marks {
		batch := []sendReq{r}
	gather:
		for len(batch) < 64 {
			select {
			case r := <-s.marks:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		var bodies []string
		// A panic fails the batch's deliveries (tried again), not the process.
		err := runtimex.Call(func() error {
			var err error
			bodies, err = s.markBatch(context.Background(), batch)
			return err
		})
		for i, r := range batch {
			if err != nil {
				r.out <- sendRes{err: err}
				continue
			}
			r.out <- sendRes{body: bodies[i]}
		}
	}
}

// markBatch marks the batch's deliveries, committed (the statements of
// one batch are one implicit transaction), then reads their bodies.
func (s *Service) markBatch(ctx context.Context, batch []sendReq) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	b := &pgx.Batch{}
	ts := make([]async.Task, len(batch))
	for i, r := range batch {
		ts[i] = r.t
		b.Queue(`UPDATE webhook_deliveries SET sending_until = now() + $4::INT8 * INTERVAL '1 millisecond'
			WHERE project_id = $1 AND webhook_id = $2 AND id = $3`, r.t.ProjectID, r.webhookID, r.t.ID, (s.o.Timeout + sendSlack).Milliseconds())
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("webhooks: marking %d deliveries: %w", len(batch), err)
	}
	payloads, err := async.Current(ctx, s.pool, ts)
	bodies := make([]string, len(batch))
	for i := range payloads {
		var d deliveryTask
		if err = json.Unmarshal(payloads[i], &d); err != nil {
			break
		}
		bodies[i] = d.Body
	}
	if err == nil {
		return bodies, nil
	}
	// Unsent: the marks go (or lapse by themselves if this fails too).
	b = &pgx.Batch{}
	for _, r := range batch {
		b.Queue(`UPDATE webhook_deliveries SET sending_until = NULL WHERE project_id = $1 AND webhook_id = $2 AND id = $3`,
			r.t.ProjectID, r.webhookID, r.t.ID)
	}
	_ = s.pool.SendBatch(ctx, b).Close()
	return nil, fmt.Errorf("webhooks: deliveries read afresh: %w", err)
}

// AwaitSends waits until no delivery of projectID marked sending before it
// was called is still sending: called by a permanent deletion once it has
// committed, before it answers, so that no body read before the
// deletion (with the customer's data in it) is still being sent when the
// deletion says DONE. Marks made after its first look read the deletion
// and are not waited for. It waits at most as long as a mark lasts
// (Timeout and sendSlack): a delivery whose worker died stops being waited
// for when its mark lapses.
func (s *Service) AwaitSends(ctx context.Context, projectID string) error {
	var cutoff time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now() + $1::INT8 * INTERVAL '1 millisecond'`,
		(s.o.Timeout + sendSlack + skewSlack).Milliseconds()).Scan(&cutoff); err != nil {
		return err
	}
	deadline := time.Now().Add(s.o.Timeout + sendSlack + skewSlack)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE project_id = $1 AND sending_until IS NOT NULL
			AND sending_until > now() AND sending_until <= $2`, projectID, cutoff).Scan(&n); err != nil {
			return err
		}
		if n == 0 || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}
