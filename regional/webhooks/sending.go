package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tallyhq/tally/regional/async"
)

// sendSlack is how much longer than Timeout a delivery's mark lasts: the
// payload's fresh read before the request, and its attempt's record after.
const sendSlack = 5 * time.Second

// skewSlack is how much later than a deletion's first look a mark may be
// stamped and still be waited for: the clocks of a CockroachDB cluster's
// nodes differ by up to its maximum offset (500 ms by default).
const skewSlack = time.Second

// sending marks delivery t (of webhook webhookID) as sending until its
// attempt is recorded (recordAttempts clears the mark) or Timeout and
// sendSlack have passed, commits that, and only then reads the body it
// sends afresh (async.Current): redacted by every permanent deletion that
// committed before the read, the customer's data taken out. A deletion
// that commits after the read finds the mark (AwaitSends) and waits for
// the send before it answers. No transaction is held across the request:
// the mark is a statement of its own. On a failure the delivery is tried
// again later, unsent.
func (s *Service) sending(ctx context.Context, t async.Task, webhookID string) (string, error) {
	if _, err := s.pool.Exec(ctx, `UPDATE webhook_deliveries SET sending_until = now() + $4::INT8 * INTERVAL '1 millisecond'
		WHERE project_id = $1 AND webhook_id = $2 AND id = $3`, t.ProjectID, webhookID, t.ID, (s.o.Timeout + sendSlack).Milliseconds()); err != nil {
		return "", fmt.Errorf("webhooks: marking delivery %s: %w", t.ID, err)
	}
	payload, err := async.Current(ctx, s.pool, t)
	if err == nil {
		var d deliveryTask
		if err = json.Unmarshal(payload, &d); err == nil {
			return d.Body, nil
		}
	}
	// Unsent: the mark goes (or lapses by itself if this fails too).
	_, _ = s.pool.Exec(ctx, `UPDATE webhook_deliveries SET sending_until = NULL WHERE project_id = $1 AND webhook_id = $2 AND id = $3`,
		t.ProjectID, webhookID, t.ID)
	return "", fmt.Errorf("webhooks: delivery %s read afresh: %w", t.ID, err)
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
