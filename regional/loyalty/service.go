package loyalty

import (
	"context"
	"errors"
	"time"

	"github.com/tallyhq/tally/internal/clock"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/tiers"
	"github.com/tallyhq/tally/regional/webhooks"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/loyalty")

// Notifier raises webhook notices in the writer's transaction.
type Notifier interface {
	Emit(ctx context.Context, tx db.Querier, n webhooks.Notice) error
	// Queue is Emit for a transaction sent in batches (db.InPipe).
	Queue(ctx context.Context, b *pgx.Batch, n webhooks.Notice) error
}

// Service holds the rules of loyalty programs and the points ledger.
type Service struct {
	pool     *db.Pool
	notify   Notifier
	attrs    attrsCache
	clock    *clock.Clock
	camps    *campaigns.Service // the programs' rows and their notices
	tierEarn TierEarning
}

// TierEarning is what a card earns when its holder moves between its
// program's tiers (regional/earning's TierMoves): the earning rules on
// customer.loyalty.tier.* events. They are read with every locked card, so
// that the points are written in the transaction that moved the card,
// whatever moved it, through the one ledger write; a rule with a
// validation rule, which needs the customer read, is queued on the write's
// batch instead, to earn in the asynchronous phase.
type TierEarning interface {
	// Column is an SQL column over the card's campaign (alias k) read with
	// each locked card: what Earn is given.
	Column() string
	// Earn answers the accruals move earns now, and queues on b (the
	// write's batch, so that a rolled-back move queues nothing) the
	// accruals it defers.
	Earn(ctx context.Context, b *pgx.Batch, move TierMove) ([]TierAccrual, error)
}

// TierMove is a move of a card between its program's tiers, as TierEarning
// reads it: the campaign's column (Col), tiers.Shift's event, tier and
// previous tier, the tier its holder is in now (nil: none) and the write's
// instant.
type TierMove struct {
	Project, CardID, CampaignID, HolderID string
	Col                                   []byte
	Event                                 string
	Tier, Previous, Holder                *tiers.Tier
	At                                    time.Time
}

// TierAccrual is points a tier event earns, with their expiry (ByProgram:
// the program's rules; else Expires, nil for never) and the details of
// their ledger entry beside its balance.
type TierAccrual struct {
	Points    int64
	ByProgram bool
	Expires   *time.Time
	Details   map[string]any
}

// Now is the service's time: the platform clock, which tests move.
func (s *Service) Now() time.Time { return s.clock.Now() }

// NewService returns the loyalty service; camps writes its programs' rows;
// tierEarn (nil: none) gives the points of tier events.
func NewService(pool *db.Pool, notify Notifier, camps *campaigns.Service, tierEarn TierEarning, clk *clock.Clock) *Service {
	col := `NULL::JSONB`
	if tierEarn != nil {
		col = tierEarn.Column()
	}
	return &Service{pool: pool, notify: notify, camps: camps, attrs: newAttrsCache(10_000, col),
		clock: clk, tierEarn: tierEarn}
}

func notFoundCard(id string) error { return apierr.NotFound("voucher", id) }

// campaign loads a live campaign or answers 404.
func (s *Service) Campaign(ctx context.Context, q db.Querier, projectID, idOrName string) (Campaign, error) {
	c, err := getCampaign(ctx, q, projectID, idOrName)
	if errors.Is(err, db.ErrNotFound) {
		return Campaign{}, campaigns.NotFound(idOrName)
	}
	return c, err
}

// card loads the card ref names, of a live campaign (ref's, when it names
// one), or answers 404.
func (s *Service) card(ctx context.Context, q db.Querier, ref CardRef, lock bool) (Card, Campaign, error) {
	var camp Campaign
	var err error
	if ref.Campaign != "" {
		if camp, err = s.Campaign(ctx, q, ref.Project, ref.Campaign); err != nil {
			return Card{}, Campaign{}, err
		}
	}
	c, err := getCard(ctx, q, ref.Project, ref.Member, lock)
	if errors.Is(err, db.ErrNotFound) {
		return Card{}, Campaign{}, notFoundCard(ref.Member)
	}
	if err != nil {
		return Card{}, Campaign{}, err
	}
	if ref.Campaign != "" {
		if c.CampaignID != camp.ID {
			return Card{}, Campaign{}, notFoundCard(ref.Member)
		}
		return c, camp, nil
	}
	camp, err = getCampaign(ctx, q, ref.Project, c.CampaignID)
	if errors.Is(err, db.ErrNotFound) { // its campaign was deleted
		return Card{}, Campaign{}, notFoundCard(ref.Member)
	}
	return c, camp, err
}

// CheckText refuses text longer than the API stores (campaigns.CheckText).
func CheckText(name string, v *string) error { return campaigns.CheckText(name, v) }

func parseDate(s string) (time.Time, error) {
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return d, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, err
	}
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
}

func ptr[T any](v T) *T { return &v }
