package campaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/bin"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Notifier raises webhook notices in the writer's transaction.
type Notifier interface {
	Emit(ctx context.Context, tx db.Querier, n webhooks.Notice) error
}

// Service holds the writes every campaign type shares: creating a row,
// the common properties of an update, enabling and disabling, deletion to
// the bin or for good, and the webhook notices of each. The kinds
// (loyalty, vouchers, promotions, referrals) are built on it.
type Service struct {
	pool   *db.Pool
	notify Notifier
	meta   MetadataSchemas
	clock  *clock.Clock
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// NewService returns the campaigns' service; meta checks every campaign's
// metadata, of whatever kind, as Insert and Change write it.
func NewService(pool *db.Pool, notify Notifier, meta MetadataSchemas, clk *clock.Clock) *Service {
	return &Service{pool: pool, notify: notify, meta: meta, clock: clk}
}

// Now is the service's time: the platform clock, which tests move.
func (s *Service) Now() time.Time { return s.clock.Now() }

// CheckMetadata checks md, the metadata a write of resource leaves, against
// the project's schema of it: for the kinds' rows the campaigns do not
// own but hold the checker for (a loyalty card's, a voucher's).
func (s *Service) CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error {
	return s.meta.CheckMetadata(ctx, projectID, resource, md)
}

// Emit raises a campaign's webhook notice (EventCreated, …) in tx.
func (s *Service) Emit(ctx context.Context, tx db.Querier, n webhooks.Notice) error {
	return s.notify.Emit(ctx, tx, n)
}

// NotFound is the 404 of a campaign named idOrName.
func NotFound(idOrName string) error { return apierr.NotFound("campaign", idOrName) }

// Insert writes the new campaign c in tx, its category the one category
// or categoryID names (SetCategory); a name already taken is the
// campaign's 409, metadata the project's campaign schema refuses a 400
// (its voucher schema, when the campaign uses that: metadataResource).
func Insert[V any](ctx context.Context, s *Service, tx db.Querier, projectID string, c *Campaign[V], category, categoryID *string) error {
	if err := s.meta.CheckMetadata(ctx, projectID, metadataResource(c.Attrs.Terms), c.Attrs.Metadata); err != nil {
		return err
	}
	if err := SetCategory(ctx, tx, projectID, &c.Attrs, category, categoryID, c.CreatedAt); err != nil {
		return err
	}
	err := insert(ctx, tx, projectID, *c)
	if errors.Is(err, db.ErrConflict) {
		return apierr.Duplicate("campaign", fmt.Sprintf("A campaign named %q already exists.", c.Name))
	}
	return err
}

// metadataResource is the schema a campaign's metadata answers to: the
// project's voucher schema when the campaign uses it (the reference's
// use_voucher_metadata_schema, "the voucher's metadata schema instead of
// the campaign metadata schema"; its vouchers then carry that metadata),
// else the campaign schema.
func metadataResource(t Terms) string {
	if t.UseVoucherMetadataSchema {
		return "voucher"
	}
	return "campaign"
}

// Change changes a live campaign of one of types (any when none) under its
// row lock: change edits it, and the campaign is written back with
// updated_at now and the webhook notice raised in the same transaction.
func Change[V any](ctx context.Context, s *Service, projectID, idOrName, event string, types []string,
	change func(tx pgx.Tx, c *Campaign[V]) error) (Campaign[V], error) {
	var c Campaign[V]
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if c, err = Get[V](ctx, tx, projectID, idOrName, true, types...); errors.Is(err, db.ErrNotFound) {
			return NotFound(idOrName)
		} else if err != nil {
			return err
		}
		name, id := c.Attrs.Category, c.Attrs.CategoryID
		before := c.Attrs.Metadata
		if err := change(tx, &c); err != nil {
			return err
		}
		// An update that sends metadata replaces it whole: checked when
		// it changed (no update changes use_voucher_metadata_schema).
		if !reflect.DeepEqual(before, c.Attrs.Metadata) {
			if err := s.meta.CheckMetadata(ctx, projectID, metadataResource(c.Attrs.Terms), c.Attrs.Metadata); err != nil {
				return err
			}
		}
		now := s.Now().UTC()
		if err := setChangedCategory(ctx, tx, projectID, &c.Attrs, name, id, now); err != nil {
			return err
		}
		c.UpdatedAt = &now
		if err := update(ctx, tx, projectID, c); err != nil {
			return err
		}
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: event, Entity: c.ID, Object: c.ViewOf()})
	})
	return c, err
}

// SetActive enables or disables a campaign of any type.
func (s *Service) SetActive(ctx context.Context, projectID, idOrName string, active bool) (View[json.RawMessage], error) {
	event := EventDisabled
	if active {
		event = EventEnabled
	}
	c, err := Change(ctx, s, projectID, idOrName, event, nil, func(_ pgx.Tx, c *Campaign[json.RawMessage]) error {
		c.Attrs.Active = active
		return nil
	})
	return c.ViewOf(), err
}

// Remove deletes a campaign of one of types (any when none): at once it
// answers 404 and its name is free. With force its vouchers (or cards) go
// for good in the CAMPAIGN.VOUCHERS_DELETE async action, whose id it
// returns; without, the campaign waits in the bin, and the action starts
// when its bin entry is removed (RemoveBinned).
func (s *Service) Remove(ctx context.Context, projectID, idOrName string, force bool, types ...string) (*string, error) {
	var actionID *string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := Get[json.RawMessage](ctx, tx, projectID, idOrName, true, types...)
		if errors.Is(err, db.ErrNotFound) {
			return NotFound(idOrName)
		} else if err != nil {
			return err
		}
		now := s.Now().UTC()
		if err := markDeleted(ctx, tx, projectID, c, now); err != nil {
			return err
		}
		if force {
			act, err := async.StartJob(ctx, tx, projectID, DeleteJob, GenerateParams{CampaignID: c.ID})
			if err != nil {
				return err
			}
			actionID = &act.ID
		} else {
			b := &pgx.Batch{}
			bin.Put(b, projectID, []bin.Entry{{ID: bin.NewID(), ResourceType: "campaign", ResourceID: c.ID,
				ResourceName: &c.Name, CreatedAt: now}})
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
		}
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventDeleted, Entity: c.ID, Object: c.ViewOf()})
	})
	return actionID, err
}

// RemoveBinned is the bin's remover of campaigns: the campaign's vouchers
// go for good in CAMPAIGN.VOUCHERS_DELETE, started in the bin's
// transaction.
func (s *Service) RemoveBinned(ctx context.Context, tx pgx.Tx, projectID string, e bin.Entry) error {
	_, err := async.StartJob(ctx, tx, projectID, DeleteJob, GenerateParams{CampaignID: e.ResourceID})
	return err
}

// generationBatch is the most vouchers one transaction of a generation
// makes.
const generationBatch = 10_000

// Generation is what Generate needs of the campaign a generation job makes
// codes for.
type Generation struct {
	Codes codes.Config // the campaign's code config
	// Count is the campaign's vouchers_count: what a job queued before jobs
	// recorded their count makes, less what Held says the campaign holds.
	Count int64
	Held  func(ctx context.Context) (int64, error)
	// Make makes n codes of gen in tx and says how many it made.
	Make func(ctx context.Context, tx pgx.Tx, gen codes.Generator, n int64) (int64, error)
}

// Generate is CAMPAIGN.VOUCHERS_GENERATE for a kind whose codes follow its
// campaign's code config: read reads the campaign (one deleted meanwhile,
// db.ErrNotFound or a 404, is no work), and RunGeneration makes what the
// job counted.
func Generate(ctx context.Context, pool db.Beginner, job *async.Job, p GenerateParams,
	read func(ctx context.Context) (Generation, error)) error {
	g, err := read(ctx)
	var ae *apierr.Error
	if errors.Is(err, db.ErrNotFound) || errors.As(err, &ae) && ae.Status == 404 {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	gen, err := codes.New(g.Codes)
	if err != nil {
		return err
	}
	if p.Count == 0 { // queued before jobs recorded their count
		have, err := g.Held(ctx)
		if err != nil {
			return err
		}
		p.Count = max(0, g.Count-have)
	}
	_, err = RunGeneration(ctx, pool, job, p.Count, func(ctx context.Context, tx pgx.Tx, n int64) (int64, error) {
		return g.Make(ctx, tx, gen, n)
	})
	return err
}

// RunGeneration makes count vouchers for a generation job, at most
// generationBatch a transaction (READ COMMITTED), each of which advances
// the job's checkpoint (how many are made) with the vouchers it made: a
// run again after a crash makes only the rest, and a run whose job another
// worker took over stops (async.ErrSuperseded) with its batch rolled back.
// So a job makes exactly the vouchers its request counted, whatever else
// adds to the campaign meanwhile (single creates, publications, other
// jobs): vouchers_count stays the number of vouchers. make makes n in tx
// and says how many it made. RunGeneration returns how many the job made.
func RunGeneration(ctx context.Context, pool db.Beginner, job *async.Job, count int64,
	make func(ctx context.Context, tx pgx.Tx, n int64) (int64, error)) (int64, error) {
	type state struct {
		Made int64 `json:"made"`
	}
	var st state
	resumed, err := job.Resume(ctx, &st)
	if err != nil {
		return 0, err
	}
	var from any
	if resumed {
		from = st
	}
	for st.Made < count {
		n := min(count-st.Made, generationBatch)
		var next state
		err := db.InTxReadCommitted(ctx, pool, func(tx pgx.Tx) error {
			made, err := make(ctx, tx, n)
			if err != nil {
				return err
			}
			next = state{Made: st.Made + made}
			return job.Advance(ctx, tx, from, next, int(next.Made*100/count))
		})
		if err != nil {
			return st.Made, err
		}
		st, from = next, next
	}
	return st.Made, nil
}
