package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
)

// imported is one item of an import's chunk on its way to a row.
type imported struct {
	row    int // 1 for the request's first order
	r      Request
	patch  *customers.Patch // the order's customer object, if any
	custAt int              // its place among the chunk's customer patches
	failed bool
}

// customers are the ids and source_ids by which e named customers (its
// customer object, customer_id, referrer_id), which its failure concerns:
// listed by the order's source_id, it may quote a value asked for one of
// them (async.Chunked.FailItemOf).
func (e *imported) customers() []string {
	var out []string
	for _, p := range []*string{e.r.CustomerID, e.r.ReferrerID} {
		if p != nil {
			out = append(out, *p)
		}
	}
	if e.patch != nil {
		for _, p := range []*string{e.patch.ID, e.patch.SourceID} {
			if p != nil {
				out = append(out, *p)
			}
		}
	}
	return out
}

// importChunk writes items (the request's orders from first on) in tx,
// set-based: the chunk's known orders and customers are read in one query
// each, its customers written by customers.ImportMany, its new orders by
// COPY and its updated ones by one UPDATE over unnest. An item that cannot
// be written is counted in st with its reason; the others are. An item
// that names a customer permanently deleted (sk) is not read: it fails
// with no source_id, and makes no customer of her again.
func (s *Service) importChunk(ctx context.Context, tx pgx.Tx, projectID string, items []json.RawMessage, first int, sk async.Skips,
	st *importProgress) error {
	fail := func(e *imported, err error) {
		e.failed = true
		st.FailItemOf(e.row-1, e.customers(), importFailure{Row: e.row, SourceID: e.r.SourceID, Reason: customers.Refusal(err)})
	}
	es, names, refs := parseChunk(items, first, func(i int) bool { return sk.Doc(first+i, items[i]) }, fail)
	known, err := customers.Resolve(ctx, tx, projectID, names)
	if err != nil {
		return err
	}
	var patches []*customers.Patch
	for _, e := range es {
		if e.failed {
			continue
		}
		// customer_id is read only without a customer object, as a
		// single write reads it.
		switch {
		case e.patch == nil && e.r.CustomerID != nil && known[*e.r.CustomerID] == "":
			fail(e, apierr.NotFound("customer", *e.r.CustomerID))
		case e.r.ReferrerID != nil && known[*e.r.ReferrerID] == "":
			fail(e, apierr.NotFound("customer", *e.r.ReferrerID))
		case e.patch != nil:
			e.custAt, patches = len(patches), append(patches, e.patch)
		}
	}
	w := chunkWrite{s: s, projectID: projectID, st: st, fail: fail, known: known, now: s.clock.Now(),
		fresh: map[*Order]bool{}, touched: map[*Order]bool{}}
	if w.custIDs, w.custErrs, err = s.customers.ImportMany(ctx, tx, projectID, patches); err != nil {
		return err
	}
	existing, err := db.Collect(scan)(tx.Query(ctx, `SELECT `+columns+` FROM orders
		WHERE project_id = $1 AND (id = ANY($2) OR source_id = ANY($2)) ORDER BY id FOR UPDATE`, projectID, refs))
	if err != nil {
		return err
	}
	w.byID, w.bySource = map[string]*Order{}, map[string]*Order{}
	for i := range existing {
		o := &existing[i]
		w.byID[o.ID] = o
		if o.SourceID != nil {
			w.bySource[*o.SourceID] = o
		}
	}
	for _, e := range es {
		if !e.failed {
			w.place(ctx, e)
		}
	}
	if err := copyOrders(ctx, tx, projectID, w.created); err != nil {
		return err
	}
	return updateOrders(ctx, tx, projectID, w.updated)
}

// parseChunk decodes and checks each item on its own, and lists the
// customers (ids or source_ids) and orders (ids and source_ids) the chunk
// names, to be read in one query each.
func parseChunk(items []json.RawMessage, first int, erased func(i int) bool, fail func(*imported, error)) (es []*imported, names, refs []string) {
	es = make([]*imported, len(items))
	for i, raw := range items {
		e := &imported{row: first + i + 1, custAt: -1}
		es[i] = e
		if erased(i) {
			fail(e, errors.New(async.ErasedItem))
			continue
		}
		if err := json.Unmarshal(raw, &e.r); err != nil {
			fail(e, httpx.DecodeError(err))
			continue
		}
		// The order's own properties, checked as a single write's are.
		if err := apply(&Order{}, e.r); err != nil {
			fail(e, err)
			continue
		}
		if len(e.r.Customer) > 0 && string(e.r.Customer) != "null" {
			e.patch = &customers.Patch{}
			if err := json.Unmarshal(e.r.Customer, e.patch); err != nil {
				fail(e, apierr.InvalidPayload("customer must be a customer object: "+customers.Refusal(httpx.DecodeError(err))))
				continue
			}
		} else if e.r.CustomerID != nil {
			names = append(names, *e.r.CustomerID)
		}
		if e.r.ReferrerID != nil {
			names = append(names, *e.r.ReferrerID)
		}
		// Both, so that an order renamed by id onto a source_id the
		// chunk did not otherwise read is seen to clash.
		for _, ref := range []*string{e.r.ID, e.r.SourceID} {
			if ref != nil {
				refs = append(refs, *ref)
			}
		}
	}
	return es, names, refs
}

// chunkWrite is what a chunk's items are applied to, in their order: the
// orders the chunk read or made (by id and source_id), which of them are
// new and which updated, and the customers it resolved or imported.
type chunkWrite struct {
	s         *Service
	projectID string
	st        *importProgress
	fail      func(*imported, error)
	known     map[string]string // customer id or source_id -> id
	custIDs   []string          // the imported customers' ids, by custAt
	custErrs  []error
	now       time.Time
	byID      map[string]*Order
	bySource  map[string]*Order
	fresh     map[*Order]bool // made by this chunk
	touched   map[*Order]bool // already in updated
	created   []*Order
	updated   []*Order
}

// place applies one item to the order it names (or a new one), or counts
// it failed and leaves that order as it was.
func (w *chunkWrite) place(ctx context.Context, e *imported) {
	if e.custAt >= 0 && w.custErrs[e.custAt] != nil {
		w.fail(e, fmt.Errorf("customer: %s", customers.Refusal(w.custErrs[e.custAt])))
		return
	}
	var o *Order
	switch {
	case e.r.ID != nil:
		if o = w.byID[*e.r.ID]; o == nil {
			w.fail(e, apierr.NotFound("order", *e.r.ID))
			return
		}
	case e.r.SourceID != nil:
		o = w.bySource[*e.r.SourceID]
	}
	insert := o == nil
	if insert {
		o = &Order{Status: "CREATED", Items: []map[string]any{}, CreatedAt: w.now}
	}
	before, wasPaid := *o, o.Status == "PAID" && !insert
	// Metadata is checked against the project's schemas as a single
	// write's is, on what the item leaves.
	err := apply(o, e.r)
	if err == nil {
		err = w.s.checkMetadata(ctx, w.projectID, *o, e.r, insert)
	}
	if err != nil {
		*o = before // a later item of the same order applies on what was kept
		w.fail(e, err)
		return
	}
	if e.r.SourceID != nil && w.bySource[*e.r.SourceID] != nil && w.bySource[*e.r.SourceID] != o {
		*o = before
		w.fail(e, apierr.Duplicate("order", "Another order already has this source_id."))
		return
	}
	switch {
	case e.custAt >= 0:
		o.CustomerID = &w.custIDs[e.custAt]
	case e.r.CustomerID != nil:
		id := w.known[*e.r.CustomerID]
		o.CustomerID = &id
	}
	if e.r.ReferrerID != nil {
		id := w.known[*e.r.ReferrerID]
		o.ReferrerID = &id
	}
	// A PAID order is stamped so, with nothing of what a single write
	// raises on it (the reference: no webhooks, no earning).
	if o.Status == "PAID" && !wasPaid {
		now := w.now
		o.PaidAt = &now
	}
	w.st.DoneCount++
	switch {
	case insert:
		o.ID = ids.New("ord_")
		w.byID[o.ID], w.fresh[o] = o, true
		w.created = append(w.created, o)
	case !w.fresh[o]: // an order the chunk made is still new, whatever later items set
		now := w.now
		o.UpdatedAt = &now
		if !w.touched[o] {
			w.updated, w.touched[o] = append(w.updated, o), true
		}
	}
	if o.SourceID != nil {
		if before.SourceID != nil && *before.SourceID != *o.SourceID {
			delete(w.bySource, *before.SourceID)
		}
		w.bySource[*o.SourceID] = o
	}
}

// orderRow is an order's columns (after project_id) as written.
func orderRow(o *Order) ([]any, error) {
	items, err := json.Marshal(o.Items)
	if err != nil {
		return nil, err
	}
	var meta []byte
	if o.Metadata != nil {
		if meta, err = json.Marshal(o.Metadata); err != nil {
			return nil, err
		}
	}
	return []any{o.ID, o.SourceID, o.Status, o.Amount, o.InitialAmount, o.DiscountAmount, items, meta, o.CustomerID,
		o.ReferrerID, o.CreatedAt, o.UpdatedAt, o.PaidAt}, nil
}

var orderColumns = strings.Split(strings.Join(strings.Fields(`project_id, `+columns), ""), ",")

// copyOrders inserts the chunk's new orders with COPY, in tx.
func copyOrders(ctx context.Context, tx pgx.Tx, projectID string, os []*Order) error {
	if len(os) == 0 {
		return nil
	}
	rows := make([][]any, len(os))
	for i, o := range os {
		r, err := orderRow(o)
		if err != nil {
			return err
		}
		rows[i] = append([]any{projectID}, r...)
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"orders"}, orderColumns, pgx.CopyFromRows(rows))
	return err
}

// updateOrders writes the chunk's known orders whole, in one statement.
func updateOrders(ctx context.Context, tx pgx.Tx, projectID string, os []*Order) error {
	if len(os) == 0 {
		return nil
	}
	n := len(os)
	id, status, items := make([]string, n), make([]string, n), make([]string, n)
	src, meta, cust, ref := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	amount, initial, discount := make([]*int64, n), make([]*int64, n), make([]*int64, n)
	updated, paid := make([]*time.Time, n), make([]*time.Time, n)
	for i, o := range os {
		r, err := orderRow(o)
		if err != nil {
			return err
		}
		id[i], src[i], status[i], items[i] = o.ID, o.SourceID, o.Status, string(r[6].([]byte))
		amount[i], initial[i], discount[i] = o.Amount, o.InitialAmount, o.DiscountAmount
		if m, _ := r[7].([]byte); m != nil {
			t := string(m)
			meta[i] = &t
		}
		cust[i], ref[i], updated[i], paid[i] = o.CustomerID, o.ReferrerID, o.UpdatedAt, o.PaidAt
	}
	_, err := tx.Exec(ctx, `UPDATE orders AS o SET source_id = v.src, status = v.status, amount = v.amount,
		initial_amount = v.initial, discount_amount = v.discount, items = v.items::JSONB, metadata = v.meta::JSONB,
		customer_id = v.cust, referrer_id = v.ref, updated_at = v.updated, paid_at = v.paid
		FROM unnest($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::INT8[], $6::INT8[], $7::INT8[], $8::TEXT[], $9::TEXT[], $10::TEXT[],
			$11::TEXT[], $12::TIMESTAMPTZ[], $13::TIMESTAMPTZ[])
			AS v(id, src, status, amount, initial, discount, items, meta, cust, ref, updated, paid)
		WHERE o.project_id = $1 AND o.id = v.id`,
		projectID, id, src, status, amount, initial, discount, items, meta, cust, ref, updated, paid)
	return err
}
