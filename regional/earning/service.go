package earning

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/segments"
)

// Service holds the earning rules of loyalty programs, accrues points for
// paid orders and keeps pending points.
type Service struct {
	pool    *db.Pool
	notify  loyalty.Notifier
	prog    *loyalty.Service
	clock   *clock.Clock
	schemas Schemas
	meta    MetadataSchemas
	rules   ValidationRules
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// Now is the service's time: the platform clock, which tests move.
func (s *Service) Now() time.Time { return s.clock.Now() }

// NewService returns the earning service, built on the program prog (whose
// kind takes it as its loyalty.Earning), and registers the accrual of paid
// orders in reg. schemas may be nil: then custom event rules are refused as
// unavailable; so may vrules, and then rules naming a validation rule.
func NewService(pool *db.Pool, notify loyalty.Notifier, prog *loyalty.Service, reg *async.Registry, schemas Schemas,
	meta MetadataSchemas, vrules ValidationRules, clk *clock.Clock) *Service {
	s := &Service{pool: pool, notify: notify, prog: prog, clock: clk, schemas: schemas, meta: meta, rules: vrules}
	// An accrual locks its customer's cards, in card id order.
	reg.HandleTx(orders.KindPaid, s.accrue, async.Policy{MaxAttempts: 50, ReadCommitted: true, LockOrder: func(t async.Task) string {
		var task orders.PaidTask
		_ = json.Unmarshal(t.Payload, &task)
		return task.CustomerID
	}})
	// A segment entry's accrual locks its customer's cards likewise.
	reg.HandleTx(segments.KindEntered, s.accrueSegment, async.Policy{MaxAttempts: 50, ReadCommitted: true,
		LockOrder: func(t async.Task) string {
			var e segments.EnteredTask
			_ = json.Unmarshal(t.Payload, &e)
			return e.CustomerID
		}})
	// A gated tier event's accrual locks its card, one per task.
	reg.HandleTx(KindTierMoved, s.accrueTierMove, async.Policy{MaxAttempts: 50, ReadCommitted: true,
		LockOrder: func(t async.Task) string {
			var m TierMovedTask
			_ = json.Unmarshal(t.Payload, &m)
			return m.CustomerID
		}})
	return s
}

// RuleIDs are the ids of a campaign's earning rules (the tiers' Terms).
func (s *Service) RuleIDs(ctx context.Context, q db.Querier, projectID, campaignID string) (map[string]bool, error) {
	rules, err := rulesOf(ctx, q, projectID, campaignID, "")
	ids := make(map[string]bool, len(rules))
	for _, r := range rules {
		ids[r.ID] = true
	}
	return ids, err
}

// QueueDropOfCards queues the deletion of the pending entries of cards
// being deleted (loyalty.Earning): left, the sweep would read them as due
// on every pass.
func (s *Service) QueueDropOfCards(b *pgx.Batch, projectID string, cardIDs []string) {
	b.Queue(`DELETE FROM loyalty_pending_points WHERE project_id = $1 AND card_id = ANY($2::TEXT[])`, projectID, cardIDs)
}

// DropOfCampaign deletes a deleted campaign's rules (loyalty.Earning).
func (s *Service) DropOfCampaign(ctx context.Context, q db.Querier, projectID, campaignID string) error {
	_, err := q.Exec(ctx, `DELETE FROM earning_rules WHERE project_id = $1 AND campaign_id = $2`, projectID, campaignID)
	return err
}

// handler serves the earning endpoints.
type handler struct{ svc *Service }

// Register mounts the earning-rule and pending-point endpoints on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	registerRules(g, h)
	registerTierRules(g, h)
	registerPending(g, h)
}

func ptr[T any](v T) *T { return &v }
