package webhooks

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/tenancy"
)

// Task kinds.
const (
	KindEvent   = "webhook.event"
	KindDeliver = "webhook.deliver"
)

// Event is a notice's payload in webhook version 2024-01-01, named as the
// interface names it: an event.
type Event struct {
	ID        string      `json:"id"`
	ProjectID string      `json:"project_id"`
	CreatedAt jsonx.Time  `json:"created_at"`
	Type      string      `json:"type"`
	Data      EventData   `json:"data"`
	Source    Source      `json:"source"`
	Event     EventRecord `json:"event"`
}

// EventData holds the object the notice is about.
type EventData struct {
	Object any `json:"object"`
}

// Source is the interface's event source object.
type Source struct {
	Channel string  `json:"channel"`
	APIKey  *APIKey `json:"api_key,omitempty"`
}

// APIKey names the key a request was made with.
type APIKey struct {
	Name  string `json:"name"`
	AppID string `json:"app_id"`
}

// EventRecord describes the notice itself (the payload's "event").
type EventRecord struct {
	ID        string     `json:"id"`
	Type      string     `json:"type"`
	GroupID   string     `json:"group_id"`
	EntityID  string     `json:"entity_id"`
	Category  string     `json:"category"`
	CreatedAt jsonx.Time `json:"created_at"`
}

// Notice is what a write tells its project's webhooks: the project, the
// event type webhooks subscribe to ("customer.created"), the object it is
// about (a customer's id, say) and that object's rendering. The three ids
// travel as one value so that no call can give them in the wrong order.
type Notice struct {
	Project string
	Type    string
	Entity  string
	Object  any
	// ID is the payload's id when the caller made it, so that what it
	// records elsewhere (an order's paid event, say) names the same one;
	// empty, Queue makes one.
	ID string
}

// Emit records the notice n in tx, the transaction of the write that raised
// it; its webhooks are sent once that transaction commits.
//
// The deliveries are written right here, one per active webhook subscribed
// now (the directory read is cached), so a notice costs no task of its own.
// When the directory cannot be read, a fan-out task does it later instead.
func (s *Service) Emit(ctx context.Context, tx db.Querier, n Notice) error {
	b := &pgx.Batch{}
	if err := s.Queue(ctx, b, n); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// Listens reports whether a notice of eventType would be sent anywhere, so
// that a writer can skip rendering many notices nobody receives. When the
// directory cannot be read it answers true: the notices are queued and the
// fan-out task decides later.
func (s *Service) Listens(ctx context.Context, projectID, eventType string) bool {
	hooks, err := s.dir.Webhooks(ctx, projectID)
	return err != nil || slices.ContainsFunc(hooks, func(h tenancy.Webhook) bool { return h.Active && h.Subscribed(eventType) })
}

// Queue is Emit for a transaction sent in batches (db.InPipe): the notice's
// rows are queued on b, which the caller sends in its transaction.
func (s *Service) Queue(ctx context.Context, b *pgx.Batch, n Notice) error {
	if !s.Listens(ctx, n.Project, n.Type) {
		return nil // nobody listens: not even the body is made
	}
	id := n.ID
	if id == "" {
		id = ids.New("evt_")
	}
	hooks, dirErr := s.dir.Webhooks(ctx, n.Project)
	now := jsonx.Time{Time: time.Now().UTC()}
	src := SourceOf(ctx)
	ev := Event{ID: id, ProjectID: n.Project, CreatedAt: now, Type: n.Type, Data: EventData{Object: n.Object}, Source: src,
		Event: EventRecord{ID: id, Type: n.Type, GroupID: telemetry.RequestID(ctx), EntityID: n.Entity, Category: "EFFECT", CreatedAt: now}}
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	et := eventTask{ID: id, Type: n.Type, Body: string(body)}
	if dirErr != nil {
		_, err = async.Queue(ctx, b, n.Project, async.NewTask{Kind: KindEvent, Payload: et})
		return err
	}
	return s.queueDeliveries(ctx, b, n.Project, et, hooks)
}

// SourceOf is the payload's source object of a request: the channel it came
// by and the key it used.
func SourceOf(ctx context.Context) Source {
	src := Source{Channel: "API"}
	if who, ok := identity.From(ctx); ok {
		if who.Kind == identity.KindClient {
			src.Channel = "CLIENT_API"
		}
		src.APIKey = &APIKey{Name: who.Kind, AppID: who.KeyID}
	}
	return src
}

// eventTask is the fan-out task's payload: the body is kept as the exact
// bytes every delivery of the notice sends and signs.
type eventTask struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Body string `json:"body"`
}

type deliveryTask struct {
	WebhookID string `json:"webhook_id"`
	EventID   string `json:"event_id"`
	Body      string `json:"body"`
}
