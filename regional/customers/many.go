package customers

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/webhooks"
)

// MergeMetadata is the patch of POST /v1/customers/metadata/async: the
// customer with sourceID gets the keys of md, keeping the others it has.
func MergeMetadata(sourceID string, md map[string]any) *Patch {
	raw, _ := json.Marshal(md)
	return &Patch{SourceID: &sourceID, fields: map[string]json.RawMessage{"metadata": raw}, mergeMetadata: true}
}

// UpsertMany is UpsertIn for the many patches of an import's or a bulk
// update's chunk, in tx: each names its customer by id or source_id (none:
// a new customer), which it updates or, when there is none, creates, with
// the checks and the notices of a single write, in a few round trips.
// errs[i] is why patch i was refused (nil: written, or nothing to write);
// a later patch of the same customer applies on top of an earlier one.
func (s *Service) UpsertMany(ctx context.Context, tx pgx.Tx, projectID string, ps []*Patch) (errs []error, err error) {
	_, errs, err = s.upsertMany(ctx, tx, projectID, ps, true)
	return errs, err
}

// ImportMany is UpsertMany for the customers of an order import, which
// the reference writes without webhooks: no notices are raised, while
// the watcher (segments) is told of every customer written, as for any
// write. ids[i] is the customer patch i wrote ("" where errs[i] says why
// not).
func (s *Service) ImportMany(ctx context.Context, tx pgx.Tx, projectID string, ps []*Patch) (ids []string, errs []error, err error) {
	return s.upsertMany(ctx, tx, projectID, ps, false)
}

func (s *Service) upsertMany(ctx context.Context, tx pgx.Tx, projectID string, ps []*Patch, notify bool) (idOf []string, errs []error, err error) {
	byID, bySource, erased, err := lockNamed(ctx, tx, projectID, ps)
	if err != nil {
		return nil, nil, err
	}
	errs, idOf = make([]error, len(ps)), make([]string, len(ps))
	var created, updated []*Customer
	touched := map[string]bool{}
	now := s.now()
	for i, p := range ps {
		var c *Customer
		switch {
		case p.ID != nil:
			if c = byID[*p.ID]; c == nil {
				errs[i] = missing(*p.ID, erased)
				continue
			}
		case p.SourceID != nil:
			c = bySource[*p.SourceID]
		}
		if c == nil {
			c = &Customer{ID: ids.New("cust_"), SourceID: p.SourceID, CreatedAt: now}
			attrs, err := s.checkedApply(ctx, projectID, c.Attrs, p, true)
			if err != nil {
				errs[i] = err
				continue
			}
			c.Attrs = attrs
			byID[c.ID] = c
			if c.SourceID != nil {
				bySource[*c.SourceID] = c
			}
			created, touched[c.ID] = append(created, c), true
			idOf[i] = c.ID
			continue
		}
		if same, err := p.Leaves(*c); err != nil {
			errs[i] = err
			continue
		} else if same {
			idOf[i] = c.ID
			continue
		}
		if p.SourceID != nil && (c.SourceID == nil || *c.SourceID != *p.SourceID) {
			// Renaming by id onto another customer's source_id would break
			// the one-customer-a-source_id rule.
			if other := bySource[*p.SourceID]; other != nil && other != c {
				errs[i] = apierr.Duplicate("customer", "Another customer already has this source_id.")
				continue
			}
		}
		attrs, err := s.checkedApply(ctx, projectID, c.Attrs, p, false)
		if err != nil {
			errs[i] = err
			continue
		}
		c.Attrs = attrs
		if p.SourceID != nil && (c.SourceID == nil || *c.SourceID != *p.SourceID) {
			if c.SourceID != nil {
				delete(bySource, *c.SourceID)
			}
			src := *p.SourceID
			c.SourceID, bySource[src] = &src, c
		}
		idOf[i] = c.ID
		if !touched[c.ID] {
			c.UpdatedAt = &now
			updated, touched[c.ID] = append(updated, c), true
		}
	}
	b := &pgx.Batch{}
	if err := queueInsertMany(b, projectID, created); err != nil {
		return nil, nil, err
	}
	if err := queueUpdateMany(b, projectID, updated); err != nil {
		return nil, nil, err
	}
	if s.watch != nil && len(touched) > 0 {
		changed := make([]string, 0, len(touched))
		for _, c := range append(created, updated...) {
			changed = append(changed, c.ID)
		}
		if err := s.watch.Changed(ctx, b, projectID, changed); err != nil {
			return nil, nil, err
		}
	}
	if notify {
		if err := s.queueNotices(ctx, b, projectID, created, updated); err != nil {
			return nil, nil, err
		}
	}
	return idOf, errs, tx.SendBatch(ctx, b).Close()
}

// lockNamed reads and locks the customers ps name (by id, else by
// source_id), in id order as every writer of many customers locks them,
// and which of the ids not found were permanently deleted.
func lockNamed(ctx context.Context, tx pgx.Tx, projectID string, ps []*Patch) (byID, bySource map[string]*Customer,
	erased map[string]bool, err error) {
	var idsOf, srcs []string
	for _, p := range ps {
		switch {
		case p.ID != nil:
			idsOf = append(idsOf, *p.ID)
		case p.SourceID != nil:
			srcs = append(srcs, *p.SourceID)
		}
	}
	found, err := db.Collect(scan)(tx.Query(ctx, `SELECT `+columns+` FROM customers
		WHERE project_id = $1 AND (id = ANY($2) OR source_id = ANY($3)) ORDER BY id FOR UPDATE`, projectID, idsOf, srcs))
	if err != nil {
		return nil, nil, nil, err
	}
	byID, bySource = map[string]*Customer{}, map[string]*Customer{}
	for i := range found {
		c := &found[i]
		byID[c.ID] = c
		if c.SourceID != nil {
			bySource[*c.SourceID] = c
		}
	}
	erased, err = erasedIDs(ctx, tx, projectID, idsOf, byID)
	return byID, bySource, erased, err
}

// queueNotices queues the customer.created and customer.updated notices of
// a chunk's customers onto b.
func (s *Service) queueNotices(ctx context.Context, b *pgx.Batch, projectID string, created, updated []*Customer) error {
	for _, w := range []struct {
		typ string
		cs  []*Customer
	}{{"customer.created", created}, {"customer.updated", updated}} {
		for _, c := range w.cs {
			if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: w.typ, Entity: c.ID, Object: c.View()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkedApply is a with p applied, its metadata checked against the
// project's schema as a customer created (create) or updated.
func (s *Service) checkedApply(ctx context.Context, projectID string, a Attrs, p *Patch, create bool) (Attrs, error) {
	attrs, err := applied(a, p)
	if err != nil {
		return attrs, err
	}
	return attrs, s.checkMetadata(ctx, projectID, p, attrs, create)
}

// applied is a with the patch applied, a left as it is (Apply stops at the
// first bad property, having set those before it).
func applied(a Attrs, p *Patch) (Attrs, error) {
	if p.whole != nil {
		return p.whole.clone(), nil
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return a, err
	}
	var out Attrs
	if err := json.Unmarshal(raw, &out); err != nil {
		return a, err
	}
	if err := p.Apply(&out); err != nil {
		return a, err
	}
	return out, nil
}

// Refusal is an error as a failed item's reason: an API error's details.
func Refusal(err error) string {
	var e *apierr.Error
	if errors.As(err, &e) {
		if e.Details != "" {
			return e.Details
		}
		return e.Message
	}
	return err.Error()
}

// manyColumns are the columns of cs as arrays, one a column, for an
// unnest of $2…$7: id, source_id, name, email, attrs and at(c), the time
// the statement writes.
func manyColumns(cs []*Customer, at func(*Customer) time.Time) ([]any, error) {
	id, src, name, email, attrs := make([]string, len(cs)), make([]*string, len(cs)), make([]*string, len(cs)), make([]*string, len(cs)), make([]string, len(cs))
	when := make([]any, len(cs))
	for i, c := range cs {
		a, err := json.Marshal(c.Attrs)
		if err != nil {
			return nil, err
		}
		id[i], src[i], name[i], email[i], attrs[i], when[i] = c.ID, c.SourceID, c.Attrs.Name, c.Attrs.Email, string(a), at(c)
	}
	return []any{id, src, name, email, attrs, when}, nil
}

func queueInsertMany(b *pgx.Batch, projectID string, cs []*Customer) error {
	if len(cs) == 0 {
		return nil
	}
	cols, err := manyColumns(cs, func(c *Customer) time.Time { return c.CreatedAt })
	if err != nil {
		return err
	}
	b.Queue(`INSERT INTO customers (project_id, id, source_id, name, email, attrs, created_at)
		SELECT $1, v.id, v.src, v.name, v.email, v.attrs::JSONB, v.at
		FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TIMESTAMPTZ[]) AS v(id, src, name, email, attrs, at)`,
		append([]any{projectID}, cols...)...)
	return nil
}

func queueUpdateMany(b *pgx.Batch, projectID string, cs []*Customer) error {
	if len(cs) == 0 {
		return nil
	}
	cols, err := manyColumns(cs, func(c *Customer) time.Time { return *c.UpdatedAt })
	if err != nil {
		return err
	}
	b.Queue(`UPDATE customers AS c SET source_id = v.src, name = v.name, email = v.email, attrs = v.attrs::JSONB, updated_at = v.at
		FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TIMESTAMPTZ[]) AS v(id, src, name, email, attrs, at)
		WHERE c.project_id = $1 AND c.id = v.id`, append([]any{projectID}, cols...)...)
	return nil
}
