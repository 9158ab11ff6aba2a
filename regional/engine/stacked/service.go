package stacked

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/redemptions"
	"github.com/tallyhq/tally/regional/vouchers"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/engine/stacked")

// Webhook event types of rollbacks, as the reference names them.
const (
	EventRollbackSucceeded = "redemption.rollback.succeeded"
	EventRollbackFailed    = "redemption.rollback.failed"
)

// Deps are the services the stacked redemptions are read and rolled back
// through.
type Deps struct {
	Pool        *db.Pool
	Notify      loyalty.Notifier
	Vouchers    *vouchers.Service
	Redemptions *redemptions.Service // loyalty reward redemptions, listed and read beside these
	Clock       *clock.Clock
}

// Service reads, lists and rolls back stacked redemptions.
type Service struct{ Deps }

// New returns the service.
func New(d Deps) *Service { return &Service{Deps: d} }

// now is the present, to the millisecond that answers show (as the
// engine's).
func (s *Service) now() time.Time { return s.Clock.Now().UTC().Truncate(time.Millisecond) }

// Get returns a stacked redemption (r_) with its present status and
// rollback, or a rollback (rr_); errNotStacked when id is none of these.
func (s *Service) Get(ctx context.Context, projectID, id string) (map[string]any, error) {
	x, _, err := family(ctx, s.Pool, projectID, id)
	if errors.Is(err, db.ErrNotFound) {
		v, err := storedRollback(ctx, s.Pool, projectID, id)
		if errors.Is(err, db.ErrNotFound) {
			return nil, errNotStacked
		}
		return v, err
	}
	if err != nil {
		return nil, err
	}
	rbs, err := rollbacksOf(ctx, s.Pool, projectID, []string{x.ID})
	if err != nil {
		return nil, err
	}
	return current(x, rbs[x.ID]), nil
}
