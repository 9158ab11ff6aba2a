package customers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/webhooks"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/customers")

// Notifier raises webhook notices in the writer's transaction (Queue: in
// a batch of it, as many writes send theirs).
type Notifier interface {
	Emit(ctx context.Context, tx db.Querier, n webhooks.Notice) error
	Queue(ctx context.Context, b *pgx.Batch, n webhooks.Notice) error
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
	// Cells is how an import's metadata cells read, typed by the schema
	// (metaschemas.Checker.Cells).
	Cells(ctx context.Context, projectID, resource string) (func(key, cell string) any, error)
}

// Service holds the customer rules.
type Service struct {
	pool     *db.Pool
	notify   Notifier
	meta     MetadataSchemas
	watch    Watcher // nil: nobody follows customers' changes
	now      func() time.Time
	onDelete []Dependent
	erasers  Erasers
	wake     func() // starts the worker on a new job (HandleJobs)
	reports  async.Reports
}

// Dependent removes what a package keeps of a customer (the custom events
// and activity that name them, say), in the transaction that deletes the
// customer.
type Dependent func(ctx context.Context, tx pgx.Tx, projectID, customerID string) error

// NewService returns the customer service over a regional database; meta
// checks the metadata of every write, watch (nil: none) is told of every customer created, updated or deleted, a
// customer's permanent deletion runs each of erasers, in order, and any
// deletion then each of dependents.
func NewService(pool *db.Pool, notify Notifier, meta MetadataSchemas, watch Watcher, erasers Erasers, dependents ...Dependent) *Service {
	return &Service{pool: pool, notify: notify, meta: meta, watch: watch, onDelete: dependents, erasers: erasers,
		now: func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }}
}

// Upsert creates a customer, or updates the one named by the patch's id or
// source_id. created tells which happened.
func (s *Service) Upsert(ctx context.Context, projectID string, p *Patch) (c Customer, created bool, err error) {
	ctx, span := tracer.Start(ctx, "customers.Upsert")
	defer telemetry.End(span, &err)
	attempt := func() error {
		return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			c, created, err = s.UpsertIn(ctx, tx, projectID, p)
			return err
		})
	}
	err = attempt()
	if errors.Is(err, db.ErrConflict) && p.SourceID != nil {
		// Another request created this source_id between our read and insert:
		// run again, and this time update it.
		err = attempt()
	}
	if errors.Is(err, db.ErrConflict) {
		return Customer{}, false, apierr.Duplicate("customer", "A customer with this source_id already exists.")
	}
	return c, created, err
}

// UpsertIn is Upsert in the caller's transaction, for writes that create
// or update a customer along with something else (a loyalty card's holder).
func (s *Service) UpsertIn(ctx context.Context, tx pgx.Tx, projectID string, p *Patch) (c Customer, created bool, err error) {
	read := func(lock bool) (Customer, error) {
		switch {
		case p.ID != nil:
			c, err := get(ctx, tx, projectID, *p.ID, lock)
			if errors.Is(err, db.ErrNotFound) {
				return Customer{}, s.notFound(ctx, tx, projectID, *p.ID)
			}
			return c, err
		case p.SourceID != nil:
			return getBySourceID(ctx, tx, projectID, *p.SourceID, lock)
		}
		return Customer{}, db.ErrNotFound
	}
	// A customer named as it is (an order's, a redemption's, an event's)
	// is read without a lock and not written again: no row lock held to
	// the commit, no customer.updated for nothing. A change locks it and
	// reads it again.
	c, err = read(false)
	switch {
	case err == nil:
		if same, err := p.Leaves(c); err == nil && same {
			return c, false, nil
		}
		if c, err = read(true); err != nil {
			return Customer{}, false, err
		}
		return c, false, s.applyUpdate(ctx, tx, projectID, &c, p)
	case errors.Is(err, db.ErrNotFound):
		c = Customer{ID: ids.New("cust_"), SourceID: p.SourceID, CreatedAt: s.now()}
		if err := p.Apply(&c.Attrs); err != nil {
			return Customer{}, false, err
		}
		if err := s.checkMetadata(ctx, projectID, p, c.Attrs, true); err != nil {
			return Customer{}, false, err
		}
		if err := insert(ctx, tx, projectID, c); err != nil {
			return Customer{}, false, err
		}
		if err := s.changed(ctx, tx, projectID, c.ID); err != nil {
			return Customer{}, false, err
		}
		return c, true, s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: "customer.created", Entity: c.ID,
			Object: c.View()})
	default:
		return Customer{}, false, err
	}
}

// GetIn returns a customer by id or source_id in the caller's transaction.
func (s *Service) GetIn(ctx context.Context, tx pgx.Tx, projectID, idOrSource string) (Customer, error) {
	c, err := get(ctx, tx, projectID, idOrSource, false)
	if errors.Is(err, db.ErrNotFound) {
		return Customer{}, s.notFound(ctx, tx, projectID, idOrSource)
	}
	return c, err
}

// checkMetadata checks the metadata a patch leaves: a new customer's
// always (its required keys), an existing one's when the patch sends
// metadata (the merged result).
func (s *Service) checkMetadata(ctx context.Context, projectID string, p *Patch, a Attrs, create bool) error {
	if !create && !p.sets("metadata") {
		return nil
	}
	return s.meta.CheckMetadata(ctx, projectID, "customer", a.Metadata)
}

func (s *Service) applyUpdate(ctx context.Context, tx pgx.Tx, projectID string, c *Customer, p *Patch) error {
	if err := p.Apply(&c.Attrs); err != nil {
		return err
	}
	if err := s.checkMetadata(ctx, projectID, p, c.Attrs, false); err != nil {
		return err
	}
	if p.SourceID != nil {
		c.SourceID = p.SourceID
	}
	now := s.now()
	c.UpdatedAt = &now
	if err := update(ctx, tx, projectID, *c); err != nil {
		return err
	}
	if err := s.changed(ctx, tx, projectID, c.ID); err != nil {
		return err
	}
	return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: "customer.updated", Entity: c.ID, Object: c.View()})
}

// Get returns a customer by id or source_id.
func (s *Service) Get(ctx context.Context, projectID, idOrSource string) (Customer, error) {
	c, err := get(ctx, s.pool, projectID, idOrSource, false)
	if errors.Is(err, db.ErrNotFound) {
		return Customer{}, s.notFound(ctx, s.pool, projectID, idOrSource)
	}
	return c, db.Classify(err)
}

// Update changes the properties the patch names.
func (s *Service) Update(ctx context.Context, projectID, idOrSource string, p *Patch) (Customer, error) {
	var c Customer
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		c, err = get(ctx, tx, projectID, idOrSource, true)
		if errors.Is(err, db.ErrNotFound) {
			return s.notFound(ctx, tx, projectID, idOrSource)
		}
		if err != nil {
			return err
		}
		return s.applyUpdate(ctx, tx, projectID, &c, p)
	})
	if errors.Is(err, db.ErrConflict) {
		return Customer{}, apierr.Duplicate("customer", "Another customer already has this source_id.")
	}
	return c, err
}

// Delete removes a customer for good, with what its Dependents remove.
func (s *Service) Delete(ctx context.Context, projectID, idOrSource string) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := get(ctx, tx, projectID, idOrSource, true)
		if errors.Is(err, db.ErrNotFound) {
			return s.notFound(ctx, tx, projectID, idOrSource)
		}
		if err != nil {
			return err
		}
		if err := remove(ctx, tx, projectID, c.ID); err != nil {
			return err
		}
		if err := s.changed(ctx, tx, projectID, c.ID); err != nil {
			return err
		}
		for _, fn := range s.onDelete {
			if err := fn(ctx, tx, projectID, c.ID); err != nil {
				return err
			}
		}
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: "customer.deleted", Entity: c.ID, Object: c.View()})
	})
}

// List returns a page of customers and how many match the filters.
func (s *Service) List(ctx context.Context, projectID string, lq ListQuery) (out []Customer, total int, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		out, total, err = list(ctx, tx, projectID, lq)
		return err
	})
	return out, total, err
}

// Leaves says whether the patch leaves c as it is (true: nothing to write).
func (p *Patch) Leaves(c Customer) (same bool, err error) {
	if p.SourceID != nil && (c.SourceID == nil || *c.SourceID != *p.SourceID) {
		return false, nil
	}
	// The patch applied to a deep copy: Apply writes into the maps it
	// finds (metadata), which a shallow copy would share with c.
	a, err := json.Marshal(c.Attrs)
	if err != nil {
		return false, err
	}
	var after Attrs
	if err := json.Unmarshal(a, &after); err != nil {
		return false, err
	}
	if err := p.Apply(&after); err != nil {
		return false, err
	}
	b, err := json.Marshal(after)
	return err == nil && bytes.Equal(a, b), err
}

// changed tells the watcher of customers written in tx.
func (s *Service) changed(ctx context.Context, tx pgx.Tx, projectID string, ids ...string) error {
	if s.watch == nil || len(ids) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := s.watch.Changed(ctx, b, projectID, ids); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}
