package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/webhooks"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/orders")

// Notifier raises webhook notices in a writer's transaction.
type Notifier interface {
	Queue(ctx context.Context, b *pgx.Batch, n webhooks.Notice) error
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// Service holds the rules of orders.
type Service struct {
	pool      *db.Pool
	notify    Notifier
	meta      MetadataSchemas
	customers *customers.Service
	clock     *clock.Clock
	wake      func()
}

// NewService returns the order service; clk is the platform clock, and
// wake (when not nil) tells this instance's outbox worker that an order.paid
// task was committed.
func NewService(pool *db.Pool, notify Notifier, meta MetadataSchemas, cust *customers.Service, clk *clock.Clock, wake func()) *Service {
	return &Service{pool: pool, notify: notify, meta: meta, customers: cust, clock: clk, wake: wake}
}

const columns = `id, source_id, status, amount, initial_amount, discount_amount, items, metadata, customer_id, referrer_id,
	created_at, updated_at, paid_at`

func scan(r pgx.Row) (Order, error) {
	var o Order
	var items, meta []byte
	err := r.Scan(&o.ID, &o.SourceID, &o.Status, &o.Amount, &o.InitialAmount, &o.DiscountAmount, &items, &meta,
		&o.CustomerID, &o.ReferrerID, &o.CreatedAt, &o.UpdatedAt, &o.PaidAt)
	if err != nil {
		return Order{}, err
	}
	if err := json.Unmarshal(items, &o.Items); err != nil {
		return Order{}, err
	}
	if meta != nil {
		err = json.Unmarshal(meta, &o.Metadata)
	}
	return o, err
}

// GetIn reads an order by id, or else by source id, in q.
// QueueLock queues onto b the lock of an order's row (FOR UPDATE) in the
// caller's transaction: a redemption paying part of an order takes it after
// its card's, so that two payments for one order see each other.
func QueueLock(b *pgx.Batch, projectID, id string) {
	b.Queue(`SELECT id FROM orders WHERE project_id = $1 AND id = $2 FOR UPDATE`, projectID, id)
}

func GetIn(ctx context.Context, q db.Querier, projectID, idOrSource string, lock bool) (Order, error) {
	suffix := db.ForUpdate(lock)
	o, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE project_id = $1 AND id = $2`+suffix, projectID, idOrSource))
	if errors.Is(err, db.ErrNotFound) {
		o, err = scan(q.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE project_id = $1 AND source_id = $2`+suffix,
			projectID, idOrSource))
	}
	if errors.Is(err, db.ErrNotFound) {
		return Order{}, apierr.NotFound("order", idOrSource)
	}
	return o, err
}

// queueSave queues an order's insert (a new one) or update onto b.
func queueSave(b *pgx.Batch, projectID string, o Order, insert bool) error {
	items, err := json.Marshal(o.Items)
	if err != nil {
		return err
	}
	var meta []byte
	if o.Metadata != nil {
		if meta, err = json.Marshal(o.Metadata); err != nil {
			return err
		}
	}
	if insert {
		b.Queue(`INSERT INTO orders (project_id, `+columns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			projectID, o.ID, o.SourceID, o.Status, o.Amount, o.InitialAmount, o.DiscountAmount, items, meta, o.CustomerID,
			o.ReferrerID, o.CreatedAt, o.UpdatedAt, o.PaidAt)
		return nil
	}
	b.Queue(`UPDATE orders SET source_id = $3, status = $4, amount = $5, initial_amount = $6, discount_amount = $7,
		items = $8, metadata = $9, customer_id = $10, referrer_id = $11, updated_at = $12, paid_at = $13
		WHERE project_id = $1 AND id = $2`, projectID, o.ID, o.SourceID, o.Status, o.Amount, o.InitialAmount, o.DiscountAmount,
		items, meta, o.CustomerID, o.ReferrerID, o.UpdatedAt, o.PaidAt)
	return nil
}

func checkText(name string, v *string) error {
	if v != nil && (*v == "" || len(*v) > 300 || strings.ContainsRune(*v, 0)) {
		return apierr.InvalidPayload(name + " must be 1 to 300 characters")
	}
	return nil
}

func checkAmount(name string, v *int64) error {
	if v != nil && (*v < 0 || *v > math.MaxInt64/1000) {
		return apierr.InvalidPayload(name + " must be a non-negative amount in the smallest currency unit")
	}
	return nil
}

// items checks and completes order items: each is an order_item, and its
// amount is price × quantity when not given.
func items(in []map[string]any) ([]map[string]any, error) {
	if len(in) > 500 {
		return nil, apierr.InvalidPayload("an order has at most 500 items")
	}
	out := make([]map[string]any, len(in))
	for i, it := range in {
		item := map[string]any{}
		for k, v := range it {
			item[k] = v
		}
		num := func(k string) (*int64, error) {
			v, ok := item[k]
			if !ok || v == nil {
				return nil, nil
			}
			var f float64
			switch x := v.(type) {
			case float64:
				f = x
			case int64: // items the redemption engine recalculated
				f = float64(x)
			case json.Number:
				var err error
				if f, err = x.Float64(); err != nil {
					f = -1
				}
			default:
				f = -1
			}
			if f < 0 || f != math.Trunc(f) || f > 1e15 {
				return nil, apierr.InvalidPayload(fmt.Sprintf("items[%d].%s must be a non-negative integer", i, k))
			}
			n := int64(f)
			item[k] = n
			return &n, nil
		}
		var vals [3]*int64
		for j, k := range []string{"quantity", "price", "amount"} {
			v, err := num(k)
			if err != nil {
				return nil, err
			}
			vals[j] = v
		}
		if ro, ok := item["related_object"]; ok && ro != nil && ro != "product" && ro != "sku" {
			return nil, apierr.InvalidPayload(fmt.Sprintf("items[%d].related_object must be product or sku", i))
		}
		if vals[2] == nil && vals[0] != nil && vals[1] != nil {
			// The line's amount is bound as a given one is, not wrapped.
			if *vals[1] != 0 && *vals[0] > 1e15 / *vals[1] {
				return nil, apierr.InvalidPayload(fmt.Sprintf("items[%d]: quantity × price must be at most 1e15 (the line's amount)", i))
			}
			item["amount"] = *vals[0] * *vals[1]
		}
		item["object"] = "order_item"
		out[i] = item
	}
	return out, nil
}

// apply writes the request's properties onto o.
func apply(o *Order, r Request) error {
	for _, t := range []struct {
		name string
		v    *string
	}{{"source_id", r.SourceID}, {"customer_id", r.CustomerID}, {"referrer_id", r.ReferrerID}} {
		if err := checkText(t.name, t.v); err != nil {
			return err
		}
	}
	for _, a := range []struct {
		name string
		v    *int64
	}{{"amount", r.Amount}, {"initial_amount", r.InitialAmount}, {"discount_amount", r.DiscountAmount}} {
		if err := checkAmount(a.name, a.v); err != nil {
			return err
		}
	}
	if r.Status != nil {
		if !statuses[*r.Status] {
			return apierr.InvalidPayload("status must be one of CREATED, PAID, CANCELED, FULFILLED")
		}
		o.Status = *r.Status
	}
	if r.SourceID != nil {
		o.SourceID = r.SourceID
	}
	if r.Items != nil {
		its, err := items(r.Items)
		if err != nil {
			return err
		}
		o.Items = its
	}
	if r.Amount != nil {
		o.Amount = r.Amount
	} else if r.Items != nil {
		var sum int64
		known := false
		for _, it := range o.Items {
			if a, ok := it["amount"].(int64); ok {
				sum, known = sum+a, true
			}
		}
		if known {
			o.Amount = &sum
		}
	}
	if r.InitialAmount != nil {
		o.InitialAmount = r.InitialAmount
	}
	if r.DiscountAmount != nil {
		o.DiscountAmount = r.DiscountAmount
	}
	if o.Amount != nil && o.DiscountAmount != nil && *o.DiscountAmount > *o.Amount {
		return apierr.InvalidPayload("discount_amount must not exceed amount")
	}
	if r.Metadata != nil {
		o.Metadata = r.Metadata
	}
	if r.ReferrerID != nil {
		o.ReferrerID = r.ReferrerID
	}
	return nil
}

// Upsert is POST /v1/orders: it creates the order, or updates the one with
// the request's id or source_id.
func (s *Service) Upsert(ctx context.Context, projectID string, r Request) (View, error) {
	return s.write(ctx, projectID, "", r)
}

// Update is PUT /v1/orders/{orderId} (its id or source id).
func (s *Service) Update(ctx context.Context, projectID, idOrSource string, r Request) (View, error) {
	return s.write(ctx, projectID, idOrSource, r)
}

func (s *Service) write(ctx context.Context, projectID, target string, r Request) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "orders.write")
	defer telemetry.End(span, &err)
	var out Order
	paid := false
	attempt := func(tx pgx.Tx) error {
		var err error
		b := &pgx.Batch{}
		if out, paid, err = s.writeIn(ctx, tx, b, projectID, target, r, nil); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	}
	err = db.InTxReadCommitted(ctx, s.pool, attempt)
	if errors.Is(db.Classify(err), db.ErrConflict) {
		// Another request created this order's source_id, or its customer's,
		// between our read and insert: run again, and this time update it.
		err = db.InTxReadCommitted(ctx, s.pool, attempt)
	}
	if err != nil {
		return View{}, err
	}
	if paid && s.wake != nil {
		s.wake() // the accrual task is committed: earn now, not at the next poll
	}
	return out.View(), nil
}

// QueueWriteIn is Upsert in the caller's transaction (the redemption
// engine's), reading through tx what it must (a stored order it names, a
// customer) and queueing its writes onto b, the caller's last batch, sent
// with its COMMIT: an order named by nothing stored costs no round trip.
// known is the request's customer, read or upserted by the caller already:
// an order naming it by id is not read again. paid says the order became
// PAID, and the caller calls Wake after commit.
func (s *Service) QueueWriteIn(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID string, r Request,
	known *customers.Customer) (View, bool, error) {
	o, paid, err := s.writeIn(ctx, tx, b, projectID, "", r, known)
	return o.View(), paid, err
}

// Wake starts the accruals a PAID order left at once, not at the next poll.
func (s *Service) Wake() {
	if s.wake != nil {
		s.wake()
	}
}

func (s *Service) writeIn(ctx context.Context, tx pgx.Tx, b *pgx.Batch, projectID, target string, r Request,
	known *customers.Customer) (Order, bool, error) {
	o, insert, err := s.find(ctx, tx, projectID, target, r)
	if err != nil {
		return Order{}, false, err
	}
	wasPaid := !insert && o.Status == "PAID"
	if err := apply(&o, r); err != nil {
		return Order{}, false, err
	}
	if err := s.checkMetadata(ctx, projectID, o, r, insert); err != nil {
		return Order{}, false, err
	}
	if err := s.customer(ctx, tx, projectID, &o, r, known); err != nil {
		return Order{}, false, err
	}
	now := s.clock.Now()
	if !insert {
		o.UpdatedAt = &now
	}
	paid := o.Status == "PAID" && !wasPaid
	if paid {
		o.PaidAt = &now
	}
	if err := queueSave(b, projectID, o, insert); err != nil {
		return Order{}, false, err
	}
	if paid {
		if err := s.paid(ctx, b, projectID, o, now); err != nil {
			return Order{}, false, err
		}
	}
	return o, paid, nil
}

// checkMetadata checks the metadata a write leaves: a new order's (its
// required keys) or a sent one (an order's metadata is replaced whole),
// and each sent item's, as order_item (items are replaced whole too).
func (s *Service) checkMetadata(ctx context.Context, projectID string, o Order, r Request, insert bool) error {
	if insert || r.Metadata != nil {
		if err := s.meta.CheckMetadata(ctx, projectID, "order", o.Metadata); err != nil {
			return err
		}
	}
	if r.Items == nil {
		return nil
	}
	for i, it := range o.Items {
		md, _ := it["metadata"].(map[string]any)
		if err := s.meta.CheckMetadata(ctx, projectID, "order_item", md); err != nil {
			var e *apierr.Error
			if errors.As(err, &e) {
				e.Details = fmt.Sprintf("items[%d]: %s", i, e.Details)
			}
			return err
		}
	}
	return nil
}

// find returns the order a write is about, or a new one.
func (s *Service) find(ctx context.Context, tx pgx.Tx, projectID, target string, r Request) (Order, bool, error) {
	switch {
	case target != "":
		o, err := GetIn(ctx, tx, projectID, target, true)
		return o, false, err
	case r.ID != nil:
		o, err := GetIn(ctx, tx, projectID, *r.ID, true)
		return o, false, err
	case r.SourceID != nil:
		o, err := GetIn(ctx, tx, projectID, *r.SourceID, true)
		var e *apierr.Error
		if !errors.As(err, &e) || e.Status != 404 {
			return o, false, err
		}
	}
	return Order{ID: ids.New("ord_"), Status: "CREATED", Items: []map[string]any{}, CreatedAt: s.clock.Now()}, true, nil
}

// customer sets the order's customer: customer (an object, created or
// updated) or customer_id (which must exist); and its referrer_id, which
// must exist too. A customer_id naming known (the caller's) is not read.
func (s *Service) customer(ctx context.Context, tx pgx.Tx, projectID string, o *Order, r Request, known *customers.Customer) error {
	if len(r.Customer) > 0 && string(r.Customer) != "null" {
		var p customers.Patch
		if err := json.Unmarshal(r.Customer, &p); err != nil {
			return apierr.InvalidPayload("customer must be a customer object: " + err.Error())
		}
		c, _, err := s.customers.UpsertIn(ctx, tx, projectID, &p)
		if err != nil {
			return err
		}
		o.CustomerID = &c.ID
		return nil
	}
	if r.CustomerID != nil && known != nil && *r.CustomerID == known.ID {
		o.CustomerID = &known.ID
	} else if r.CustomerID != nil {
		c, err := s.customers.GetIn(ctx, tx, projectID, *r.CustomerID)
		if err != nil {
			return err
		}
		o.CustomerID = &c.ID
	}
	if r.ReferrerID != nil {
		// The referrer is a customer of this project: 404 naming it
		// otherwise (before, any id was stored, another project's too).
		c, err := s.customers.GetIn(ctx, tx, projectID, *r.ReferrerID)
		if err != nil {
			return err
		}
		o.ReferrerID = &c.ID
	}
	return nil
}

// paid queues what an order becoming PAID raises: the webhook notice and,
// when the order has a customer, the task that earns loyalty points.
func (s *Service) paid(ctx context.Context, b *pgx.Batch, projectID string, o Order, now time.Time) error {
	evID := ids.New("evt_")
	if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, ID: evID, Type: EventPaid, Entity: o.ID,
		Object: map[string]any{"order": o.View()}}); err != nil {
		return err
	}
	if o.CustomerID == nil {
		return nil
	}
	_, err := async.Queue(ctx, b, projectID, async.NewTask{Kind: KindPaid, MaxAttempts: 50, Payload: PaidTask{
		OrderID: o.ID, CustomerID: *o.CustomerID, EventID: evID, GroupID: telemetry.RequestID(ctx),
		CreatedAt: jsonx.Time{Time: now}, Source: webhooks.SourceOf(ctx)}})
	return err
}

// Get reads an order by id or source id.
func (s *Service) Get(ctx context.Context, projectID, idOrSource string) (View, error) {
	o, err := GetIn(ctx, s.pool, projectID, idOrSource, false)
	if err != nil {
		return View{}, err
	}
	return o.View(), nil
}

// List returns a page of orders, newest first unless order says otherwise.
func (s *Service) List(ctx context.Context, projectID string, lq listq.Query) ([]View, int, bool, string, error) {
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE project_id = $1`, projectID).Scan(&total); err != nil {
		return nil, 0, false, "", err
	}
	key := "created_at"
	if lq.Key == "updated_at" {
		key = "coalesce(updated_at, created_at)"
	}
	cond, orderBy, args := lq.Keyset("orders", key, []any{projectID, lq.Limit + 1})
	os, err := db.Collect(scan)(s.pool.Query(ctx, `SELECT `+columns+` FROM orders WHERE project_id = $1`+cond+
		` ORDER BY `+orderBy+` LIMIT $2`+lq.OffsetSQL(), args...))
	if err != nil {
		return nil, 0, false, "", err
	}
	vs, more, next := listq.PageOf(os, lq.Limit, func(o Order) string { return o.ID }, Order.View)
	return vs, total, more, next, nil
}

// NormalizeItems checks and completes order items as an order's write does
// (amount = price × quantity when not given, object order_item), for
// callers that read an order without storing it (validation).
func NormalizeItems(in []map[string]any) ([]map[string]any, error) { return items(in) }
