package customers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/erasure"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Erasers are what every package that holds a customer's personal data
// gives the permanent deletion: each erases its own tables (app.go lists
// them). Now are the bounded ones, which find the customer's rows by
// their id through an index and run in the deletion's request; Later are
// the scans of what the project retains (the outbox, async results,
// export files), whose cost grows with it: they run in the erasure task
// the deletion queues (async.ErasureKind), and until it is done the
// owners read what it has still to erase through async.Erasing. After
// run once the deletion has committed, before it answers: what must be
// over by then (webhooks.Service.AwaitSends: the deliveries that read
// their bodies before the deletion and are still sending them).
type Erasers struct {
	Now, Later []erasure.Eraser
	After      []func(ctx context.Context, projectID string) error
}

// Deletion is the reference's permanent deletion object (its object name
// spelled as the reference spells it).
type Deletion struct {
	ID              string         `json:"id"`
	CreatedAt       jsonx.Time     `json:"created_at"`
	RelatedObjectID string         `json:"related_object_id"`
	RelatedObject   string         `json:"related_object"`
	Status          string         `json:"status"`
	DataJSON        erasure.Counts `json:"data_json"`
	Object          string         `json:"object"`
}

// subject is what an erasure removes of c: the values that are the
// person's wherever they were copied. Metadata values are not among them
// (a "gold" would take every other "gold" with it): copies of the customer
// lose their metadata whole, by id.
func (c Customer) subject() erasure.Subject {
	s := erasure.Subject{CustomerID: c.ID}
	a := c.Attrs
	for _, v := range []*string{c.SourceID, a.Name, a.Email, a.Phone, a.Birthdate, a.Birthday, a.Description} {
		if v != nil && *v != "" {
			s.Values = append(s.Values, *v)
		}
	}
	if ad := a.Address; ad != nil {
		for _, v := range []*string{ad.Line1, ad.Line2} {
			if v != nil && *v != "" {
				s.Values = append(s.Values, *v)
			}
		}
	}
	return s
}

// Erase deletes a customer permanently: every package's Eraser erases
// what it holds of them, their row goes (its source_id free for a new
// customer), and a tombstone keeps the id, so a later read says they were
// deleted and nothing brings them back. Their ledger entries, orders, cards
// and redemptions stay, pointing to the id. All of it commits at once, so
// the answer is DONE and no read sees half of it.
func (s *Service) Erase(ctx context.Context, projectID, idOrSource string) (Deletion, error) {
	var d Deletion
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := get(ctx, tx, projectID, idOrSource, true)
		if errors.Is(err, db.ErrNotFound) {
			return s.notFound(ctx, tx, projectID, idOrSource)
		}
		if err != nil {
			return err
		}
		n := erasure.Counts{Customer: 1}
		subj := c.subject()
		for _, e := range s.erasers.Now {
			if err := e(ctx, tx, projectID, subj, &n); err != nil {
				return err
			}
		}
		if len(s.erasers.Later) > 0 {
			if err := async.QueueErasure(ctx, tx, projectID, subj); err != nil {
				return err
			}
		}
		for _, fn := range s.onDelete {
			if err := fn(ctx, tx, projectID, c.ID); err != nil {
				return err
			}
		}
		if err := remove(ctx, tx, projectID, c.ID); err != nil {
			return err
		}
		d = Deletion{ID: ids.New("del_"), CreatedAt: jsonx.Time{Time: s.now()}, RelatedObjectID: c.ID, RelatedObject: "customer",
			Status: "DONE", DataJSON: n, Object: "pernament_deletion"}
		data, err := json.Marshal(n)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO customer_erasures (project_id, customer_id, id, data_json, created_at)
			VALUES ($1, $2, $3, $4, $5)`, projectID, c.ID, d.ID, data, d.CreatedAt.Time); err != nil {
			return err
		}
		// Subscribers learn of the deletion, not of who it was.
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: "customer.deleted", Entity: c.ID,
			Object: Customer{ID: c.ID, CreatedAt: c.CreatedAt}.View()})
	})
	if err != nil {
		return d, err
	}
	if s.wake != nil {
		s.wake()
	}
	for _, after := range s.erasers.After {
		if err := after(ctx, projectID); err != nil {
			return Deletion{}, fmt.Errorf("customers: deletion %s committed, then: %w", d.ID, err)
		}
	}
	return d, nil
}

// eraseLater is the erasure task: the Later erasers, then the task's own
// copy of the subject, all in the transaction that finishes the task, so
// reads held for it find everything erased when it is done.
func (s *Service) eraseLater(ctx context.Context, tx pgx.Tx, t async.Task) error {
	var subj erasure.Subject
	if err := json.Unmarshal(t.Payload, &subj); err != nil {
		return fmt.Errorf("customers: erasure task %s: %w", t.ID, err)
	}
	if subj.CustomerID == "" {
		return nil // finished by an earlier try
	}
	var n erasure.Counts
	for _, e := range s.erasers.Later {
		if err := e(ctx, tx, t.ProjectID, subj, &n); err != nil {
			return err
		}
	}
	return async.ForgetErasure(ctx, tx, t)
}

// notFound is the 404 of a customer that key does not name: one that says
// so when key is the id of a customer permanently deleted.
func (s *Service) notFound(ctx context.Context, q db.Querier, projectID, key string) error {
	var delID string
	var at time.Time
	err := q.QueryRow(ctx, `SELECT id, created_at FROM customer_erasures WHERE project_id = $1 AND customer_id = $2`,
		projectID, key).Scan(&delID, &at)
	if errors.Is(err, db.ErrNotFound) || errors.Is(err, pgx.ErrNoRows) {
		return apierr.NotFound("customer", key)
	}
	if err != nil {
		return err
	}
	e := apierr.NotFound("customer", key)
	e.Message = "Customer deleted"
	e.Details = fmt.Sprintf("The customer %s was permanently deleted at %s (%s); its data is gone and the id is not used again.",
		key, at.UTC().Format(time.RFC3339), delID)
	return e
}
