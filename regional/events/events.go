// Package events serves custom events: POST /v1/events (and its bulk
// variant), validated against the project's event schemas, recorded in the
// customer's activity, and earning points through custom-event earning
// rules in the asynchronous phase.
package events

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/earning"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/webhooks"
	"github.com/tallyhq/tally/tenancy"
)

// KindAccrue is the task that earns for a stored event.
const KindAccrue = "events.accrue"

// EventCustom is the webhook event type of a stored custom event's notice.
const EventCustom = "customer.custom_event"

// Service stores custom events.
type Service struct {
	pool      *db.Pool
	notify    Notifier
	customers *customers.Service
	loyalty   *loyalty.Service
	earning   *earning.Service
	schemas   Schemas
	tasks     *async.Registry
	clock     *clock.Clock
	referrals Referrals // nil: events convert no referee
	watch     CountWatcher
}

// Referral is what an event tells of a referral conversion: the event and
// its customer (the referee), and the referral object the request sent.
type Referral struct {
	Code, ReferrerID                         *string
	CustomerID, EventID, EventType, SchemaID string
	SchemaName                               string
	Metadata                                 map[string]any
	CreatedAt                                time.Time
}

// Referrals converts an event's referral in the event's transaction
// (regional/referrals): ConvertEvent answers the activity's referral object
// ({referrer, voucher, campaign}) or nil when the event converted nothing,
// and refuses the event with a 4xx (the referrer's own code, say).
type Referrals interface {
	ConvertEvent(ctx context.Context, tx pgx.Tx, projectID string, r Referral) (any, error)
}

// Schemas reads a project's custom event schemas, which events are
// validated against: the directory's, through the cached resolver
// (tenancy.Resolver).
type Schemas interface {
	EventSchemas(ctx context.Context, projectID string) ([]tenancy.EventSchema, error)
}

// Notifier raises the webhook notice of a stored event (EventCustom) in
// the writer's batched transaction (regional/webhooks).
type Notifier interface {
	Queue(ctx context.Context, b *pgx.Batch, n webhooks.Notice) error
}

// Deps are what the service reads and writes through.
type Deps struct {
	Pool      *db.Pool
	Notify    Notifier
	Customers *customers.Service
	Loyalty   *loyalty.Service
	Earning   *earning.Service
	Schemas   Schemas
	Referrals Referrals // nil: events convert no referee
	Tasks     *async.Registry
	Clock     *clock.Clock
	// Watch is told of the customer of a stored event whose name a
	// segment's filter counts, so that those segments follow it (nil:
	// nobody).
	Watch CountWatcher
}

// CountWatcher follows the customers whose event counts its filters read
// (the segments service).
type CountWatcher interface {
	customers.Watcher
	// CountsEvent says whether a filter of the project counts events of
	// name: an event of another name queues no evaluation of its customer.
	CountsEvent(ctx context.Context, projectID, name string) (bool, error)
}

// NewService makes the service and registers its tasks.
func NewService(d Deps) *Service {
	s := &Service{pool: d.Pool, notify: d.Notify, customers: d.Customers, loyalty: d.Loyalty, earning: d.Earning,
		schemas: d.Schemas, referrals: d.Referrals, tasks: d.Tasks, clock: d.Clock, watch: d.Watch}
	// An accrual locks its customer's cards in card id order, or the one
	// card loyalty.code named. The tasks of a batch, which share a
	// transaction, run by holder and then card, so every batch takes the
	// locks in the same order (holder, card): a task for a customer's cards
	// sorts before one for a single card of theirs.
	s.tasks.HandleTx(KindAccrue, s.accrue, async.Policy{MaxAttempts: 50, ReadCommitted: true, LockOrder: lockOrder})
	s.tasks.HandleJob(BulkAction, s.bulk)
	return s
}

// DropCustomer deletes a deleted customer's events and activity, which hold
// their personal data, in the customer's deletion (a customers.Dependent).
func DropCustomer(ctx context.Context, tx pgx.Tx, projectID, customerID string) error {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM customer_activities WHERE project_id = $1 AND customer_id = $2`, projectID, customerID)
	b.Queue(`DELETE FROM custom_events WHERE project_id = $1 AND customer_id = $2`, projectID, customerID)
	b.Queue(`DELETE FROM customer_event_counts WHERE project_id = $1 AND customer_id = $2`, projectID, customerID)
	return tx.SendBatch(ctx, b).Close()
}

// Request is the body of POST /v1/events.
type Request struct {
	Event    *string          `json:"event"`
	Customer *customers.Patch `json:"customer"`
	Referral *struct {
		Code       *string `json:"code"`
		ReferrerID *string `json:"referrer_id"`
	} `json:"referral"`
	Loyalty *struct {
		Code *string `json:"code"`
	} `json:"loyalty"`
	Metadata map[string]any `json:"metadata"`
}

// View is the custom event object of the interface, with its id and
// creation time (new properties, which clients ignore).
type View struct {
	ID        string          `json:"id"`
	Object    string          `json:"object"`
	Type      string          `json:"type"`
	Customer  json.RawMessage `json:"customer"`
	Referral  any             `json:"referral"`
	Loyalty   any             `json:"loyalty"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt jsonx.Time      `json:"created_at"`
}

func invalid(format string, args ...any) error {
	return apierr.InvalidPayload(fmt.Sprintf(format, args...))
}

// check validates a request against the project's schemas and returns the
// event's schema.
func (s *Service) check(ctx context.Context, projectID string, r *Request) (tenancy.EventSchema, error) {
	if r.Event == nil || *r.Event == "" {
		return tenancy.EventSchema{}, invalid("event is required: the name of a custom event of the project's event schemas")
	}
	ev := *r.Event
	if utf8.RuneCountInString(ev) > tenancy.MaxEventNameLen {
		return tenancy.EventSchema{}, invalid("event must be at most %d characters", tenancy.MaxEventNameLen)
	}
	if r.Customer == nil {
		return tenancy.EventSchema{}, invalid("customer is required: {id} of an existing customer or {source_id, …} of one to create or find")
	}
	if r.Customer.ID == nil && (r.Customer.SourceID == nil || *r.Customer.SourceID == "") {
		return tenancy.EventSchema{}, invalid("customer needs an id or a source_id")
	}
	if r.Loyalty != nil && r.Loyalty.Code != nil && (*r.Loyalty.Code == "" || len(*r.Loyalty.Code) > 300) {
		return tenancy.EventSchema{}, invalid("loyalty.code must be a loyalty card's code")
	}
	if r.Referral != nil {
		for k, v := range map[string]*string{"code": r.Referral.Code, "referrer_id": r.Referral.ReferrerID} {
			if v != nil && len(*v) > 300 {
				return tenancy.EventSchema{}, invalid("referral.%s is longer than 300 characters", k)
			}
		}
	}
	all, err := s.schemas.EventSchemas(ctx, projectID)
	if err != nil {
		return tenancy.EventSchema{}, err
	}
	var schema *tenancy.EventSchema
	for i := range all {
		if all[i].Name == ev {
			schema = &all[i]
		}
	}
	if schema == nil {
		return tenancy.EventSchema{}, invalid("event %q has no schema in this project; define it with POST /management/v1/projects/{projectId}/custom-event-schemas", clip(ev))
	}
	return *schema, checkMetadata(*schema, r.Metadata)
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// checkMetadata checks an event's metadata against its schema: every
// property that is not optional is there, and every property of the
// schema has its type. Properties the schema does not name are kept.
func checkMetadata(sc tenancy.EventSchema, meta map[string]any) error {
	names := make([]string, 0, len(sc.Properties))
	for n := range sc.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := sc.Properties[n]
		if p.Deleted {
			continue
		}
		v, ok := meta[n]
		if !ok || v == nil {
			if !p.Optional {
				return invalid("metadata.%s is required by the schema of %s (%s)", n, sc.Name, p.Type)
			}
			continue
		}
		okType := false
		switch p.Type {
		case tenancy.PropString:
			_, okType = v.(string)
		case tenancy.PropNumber:
			switch x := v.(type) {
			case json.Number: // a number a float64 holds: 1e400 is not one
				f, err := x.Float64()
				okType = err == nil && !math.IsInf(f, 0)
			case float64:
				okType = true
			}
		case tenancy.PropBoolean:
			_, okType = v.(bool)
		case tenancy.PropDate:
			if s, isStr := v.(string); isStr {
				_, err := time.Parse(time.DateOnly, s)
				okType = err == nil
			}
		case tenancy.PropDatetime:
			if s, isStr := v.(string); isStr {
				_, err := time.Parse(time.RFC3339Nano, s)
				okType = err == nil
			}
		}
		if !okType {
			return invalid("metadata.%s must be a %s (%s), as the schema of %s says", n, p.Type, example(p.Type), sc.Name)
		}
	}
	return nil
}

func example(t string) string {
	switch t {
	case tenancy.PropDate:
		return "2024-01-31"
	case tenancy.PropDatetime:
		return "2024-01-31T12:00:00Z"
	case tenancy.PropNumber:
		return "12.5"
	case tenancy.PropBoolean:
		return "true or false"
	}
	return "text"
}

// ErrKeyReused is a reused Idempotency-Key on another request.
var errKeyReused = &apierr.Error{Status: 409, Key: "idempotency_key_reused", Message: "Idempotency key reused",
	Details: "This Idempotency-Key was used for a different request; send a new key for a new event."}

// Create stores an event and answers as soon as it is stored: its
// accrual and webhook follow in the asynchronous phase. key, when not
// empty, is the request's Idempotency-Key; body the raw request, whose
// hash tells a retry from another use of the key.
func (s *Service) Create(ctx context.Context, projectID string, r Request, key string, body []byte) (v json.RawMessage, err error) {
	ctx, span := tracer.Start(ctx, "events.Create")
	defer telemetry.End(span, &err)
	if len(key) > 255 {
		return nil, apierr.New(400, "invalid_idempotency_key", "Invalid idempotency key", "Idempotency-Key is at most 255 characters.")
	}
	hash := ""
	if key != "" {
		sum := sha256.Sum256(bytes.TrimSpace(body))
		hash = hex.EncodeToString(sum[:])
		if v, ok, err := s.replay(ctx, s.pool, projectID, key, hash); ok || err != nil {
			return v, err
		}
	}
	sc, err := s.check(ctx, projectID, &r)
	if err != nil {
		return nil, err
	}
	counted, err := s.counted(ctx, projectID, sc.Name)
	if err != nil {
		return nil, err
	}
	// Two round trips (TestAnEventIsStoredInTwoRoundTrips): the BEGIN with
	// the reads of the customer and the card, and the writes with the
	// COMMIT.
	err = db.InPipe(ctx, s.pool, pgx.Serializable, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		var pre prefetch
		if err := p.Send(ctx, pre.queue(s.loyalty, projectID, r)).Close(); err != nil {
			return nil, err
		}
		var b *pgx.Batch
		v, b, err = s.store(ctx, p.Tx(), projectID, r, sc, key, hash, counted, &pre)
		return b, err
	})
	if key != "" && errors.Is(err, db.ErrConflict) {
		// The same key committed meanwhile: its answer, or a conflict.
		v, ok, rerr := s.replay(ctx, s.pool, projectID, key, hash)
		if ok || rerr != nil {
			return v, rerr
		}
	}
	if err == nil {
		s.tasks.Wake()
	}
	return v, err
}

// replay is the first answer to a request with this key, as it was sent.
func (s *Service) replay(ctx context.Context, q db.Querier, projectID, key, hash string) (json.RawMessage, bool, error) {
	var answer []byte
	var was *string
	err := q.QueryRow(ctx, `SELECT answer, request_hash FROM custom_events WHERE project_id = $1 AND idempotency_key = $2`,
		projectID, key).Scan(&answer, &was)
	if errors.Is(err, db.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if was == nil || *was != hash {
		return nil, true, errKeyReused
	}
	return answer, true, nil
}

// counted says whether a filter segment of the project counts events of
// name (CountWatcher), asked before the event's transaction begins: on a
// cache miss the answer takes a connection of its own, which a request
// already holding its transaction's must not wait for (32 events at once
// then held every connection of the pool and waited on each other).
func (s *Service) counted(ctx context.Context, projectID, name string) (bool, error) {
	if s.watch == nil {
		return false, nil
	}
	return s.watch.CountsEvent(ctx, projectID, name)
}

// store writes the event, the customer's activity, the accrual task and
// the webhook notice in tx; with counted (a filter segment counts events
// of its name), the evaluation of its customer too.
func (s *Service) store(ctx context.Context, tx pgx.Tx, projectID string, r Request, sc tenancy.EventSchema, key, hash string,
	counted bool, pre *prefetch) (json.RawMessage, *pgx.Batch, error) {
	cust, err := s.customerIn(ctx, tx, projectID, r.Customer, pre)
	if err != nil {
		return nil, nil, err
	}
	var code *string
	var cardID, holderID string
	if r.Loyalty != nil && r.Loyalty.Code != nil {
		code = r.Loyalty.Code
		card, err := s.cardIn(ctx, tx, projectID, *code, pre)
		if err != nil {
			return nil, nil, err
		}
		cardID = card.ID
		if card.HolderID != nil {
			holderID = *card.HolderID
		}
	}
	now := s.clock.Now()
	meta := r.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	v := View{ID: ids.New("evcus_"), Object: "event", Type: sc.Name, CreatedAt: jsonx.Time{Time: now}}
	simple := cust.Simple()
	var referral, loyaltyView, converted any
	if r.Referral != nil && (r.Referral.Code != nil || r.Referral.ReferrerID != nil) {
		referral = map[string]any{"code": r.Referral.Code, "referrer_id": r.Referral.ReferrerID}
		if s.referrals != nil {
			if converted, err = s.referrals.ConvertEvent(ctx, tx, projectID, Referral{Code: r.Referral.Code, ReferrerID: r.Referral.ReferrerID,
				CustomerID: cust.ID, EventID: v.ID, EventType: v.Type, SchemaID: sc.ID, SchemaName: sc.Name, Metadata: meta,
				CreatedAt: now}); err != nil {
				return nil, nil, err
			}
		}
	}
	if code != nil {
		loyaltyView = map[string]any{"code": *code}
	}
	var refJSON []byte
	if referral != nil {
		if refJSON, err = json.Marshal(referral); err != nil {
			return nil, nil, err
		}
	}
	out, err := eventParts{view: v, customer: simple, metadata: meta, schema: sc, referral: referral, loyalty: loyaltyView,
		converted: converted}.write()
	if err != nil {
		return nil, nil, err
	}
	answer, metaJSON := out.answer, out.metadata
	var keyArg, hashArg *string
	if key != "" {
		keyArg, hashArg = &key, &hash
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO custom_events (project_id, id, type, customer_id, schema_id, schema_name, loyalty_code, referral, metadata,
		answer, idempotency_key, request_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		projectID, v.ID, v.Type, cust.ID, sc.ID, sc.Name, code, refJSON, metaJSON, answer, keyArg, hashArg, now)
	countEvent(b, projectID, cust.ID, v.Type)
	if counted {
		// The new count may move the customer into or out of a segment
		// that counts this name. Only then: a task per event for every
		// project cost the events path a fifth of its throughput and
		// tripled its p99 (docs/benchmarks.md, custom events).
		if err := s.watch.Changed(ctx, b, projectID, []string{cust.ID}); err != nil {
			return nil, nil, err
		}
	}
	groupID := telemetry.RequestID(ctx)
	b.Queue(`INSERT INTO customer_activities (project_id, customer_id, id, type, data, group_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, projectID, cust.ID, ids.New("evt_"), EventCustom, out.activity, nilIfEmpty(groupID), now)
	acc := earning.CustomEvent{ID: v.ID, Type: v.Type, CustomerID: cust.ID, LoyaltyCode: code, CardID: cardID, HolderID: holderID,
		SchemaID: sc.ID, SchemaName: sc.Name, Metadata: meta, CreatedAt: now}
	if _, err := async.Queue(ctx, b, projectID, async.NewTask{Kind: KindAccrue, Payload: accrualPayload{acc, metaJSON}}); err != nil {
		return nil, nil, err
	}
	if err := s.notify.Queue(ctx, b, webhooks.Notice{Project: projectID, Type: EventCustom, Entity: cust.ID, Object: out.data}); err != nil {
		return nil, nil, err
	}
	return answer, b, nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// customerOf finds the event's customer: by id (404 when unknown), or by
// source_id, created when new and updated only when the event names more
// than its source_id.
func (s *Service) customerOf(ctx context.Context, tx pgx.Tx, projectID string, p *customers.Patch) (customers.Customer, error) {
	if !p.Changes() {
		key := ""
		if p.ID != nil {
			key = *p.ID
		} else {
			key = *p.SourceID
		}
		c, err := s.customers.GetIn(ctx, tx, projectID, key)
		var ae *apierr.Error
		if err == nil || p.ID != nil || !errors.As(err, &ae) || ae.Status != 404 {
			return c, err
		}
	}
	c, _, err := s.customers.UpsertIn(ctx, tx, projectID, p)
	return c, err
}

// accrue is the task of a stored event: its earning rules.
func (s *Service) accrue(ctx context.Context, tx pgx.Tx, t async.Task) error {
	var ev earning.CustomEvent
	d := json.NewDecoder(bytes.NewReader(t.Payload))
	d.UseNumber()
	if err := d.Decode(&ev); err != nil {
		return fmt.Errorf("events: accrual payload: %w", err)
	}
	return s.earning.AccrueEvent(ctx, tx, t.ProjectID, ev)
}
