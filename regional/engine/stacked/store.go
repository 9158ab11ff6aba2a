package stacked

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/redemptions"
)

// Redemption is a stored stacked redemption: a parent (ObjectType
// "redemption") or a child of one redeemable. View is the object as the
// API answered it; Status and the rollbacks are the row's, current.
type Redemption struct {
	ID          string
	ParentID    *string
	ObjectType  string
	ObjectID    *string
	Code        *string
	CampaignID  *string
	CampaignNm  *string
	CustomerID  *string
	OrderID     *string
	TrackingID  *string
	Result      string
	Status      string
	Amount      int64
	GiftAmount  int64
	FailureCode *string
	SessionKey  *string
	// CardPayment is what a loyalty card paid (nil for other redeemables).
	CardPayment *redemptions.CardTaking
	View        map[string]any
	CreatedAt   time.Time
	// viewJSON is View as QueueInsert wrote it, which Answer gives.
	viewJSON encodedView
}

// encodedView is a view's JSON, written once: jsonx writes its bytes as
// they are (an answer), encoding/json compacts them, escaping HTML as it
// would have in the view (a webhook notice).
type encodedView []byte

func (v encodedView) AppendJSON(b []byte) ([]byte, error) { return append(b, v...), nil }
func (v encodedView) MarshalJSON() ([]byte, error)        { return v, nil }

// Answer is the redemption's view to answer or notify with: the bytes
// QueueInsert stored, once it has stored them, so that a stacked
// redemption's views are encoded once, not again for its answer and its
// notices; View until then. View must not change after QueueInsert.
func (x Redemption) Answer() any {
	if x.viewJSON != nil {
		return x.viewJSON
	}
	return x.View
}

const redemptionColumns = `id, parent_id, object_type, object_id, code, campaign_id, campaign_name, customer_id, order_id,
	tracking_id, result, status, amount, gift_amount, failure_code, session_key, card_payment, view, created_at`

func scanRedemption(r pgx.Row) (Redemption, error) {
	var x Redemption
	var view, card []byte
	if err := r.Scan(&x.ID, &x.ParentID, &x.ObjectType, &x.ObjectID, &x.Code, &x.CampaignID, &x.CampaignNm, &x.CustomerID,
		&x.OrderID, &x.TrackingID, &x.Result, &x.Status, &x.Amount, &x.GiftAmount, &x.FailureCode, &x.SessionKey, &card, &view,
		&x.CreatedAt); err != nil {
		return Redemption{}, err
	}
	if card != nil {
		x.CardPayment = &redemptions.CardTaking{}
		if err := json.Unmarshal(card, x.CardPayment); err != nil {
			return Redemption{}, err
		}
	}
	return x, json.Unmarshal(view, &x.View)
}

// QueueInsert queues writing redemptions, and keeps each one's view as
// written for its Answer.
func QueueInsert(b *pgx.Batch, projectID string, rs []Redemption) error {
	for i := range rs {
		x := &rs[i]
		// jsonx writes the view's tree without reflection (its order views
		// write themselves); the column is JSONB, which reads encoding/json's
		// bytes and these alike.
		view, err := jsonx.Append(nil, x.View)
		if err != nil {
			return err
		}
		x.viewJSON = view
		var card []byte
		if x.CardPayment != nil {
			if card, err = json.Marshal(x.CardPayment); err != nil {
				return err
			}
		}
		b.Queue(`INSERT INTO stacked_redemptions (project_id, id, parent_id, object_type, object_id, code, campaign_id, campaign_name,
			customer_id, order_id, tracking_id, result, status, amount, gift_amount, failure_code, session_key, card_payment, view, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
			projectID, x.ID, x.ParentID, x.ObjectType, x.ObjectID, x.Code, x.CampaignID, x.CampaignNm, x.CustomerID, x.OrderID,
			x.TrackingID, x.Result, x.Status, x.Amount, x.GiftAmount, x.FailureCode, x.SessionKey, card, view, x.CreatedAt)
	}
	return nil
}

// family reads a redemption and, for a parent, its children; db.ErrNotFound
// when there is none.
func family(ctx context.Context, q db.Querier, projectID, id string) (Redemption, []Redemption, error) {
	x, err := scanRedemption(q.QueryRow(ctx, `SELECT `+redemptionColumns+` FROM stacked_redemptions
		WHERE project_id = $1 AND id = $2`, projectID, id))
	if err != nil || x.ParentID != nil {
		return x, nil, err
	}
	kids, err := db.Collect(scanRedemption)(q.Query(ctx, `SELECT `+redemptionColumns+` FROM stacked_redemptions
		WHERE project_id = $1 AND parent_id = $2 ORDER BY id`, projectID, id))
	return x, kids, err
}

// lockFamily locks and reads the stacked redemption family id belongs to,
// in the one order of docs/architecture.md (Lock order): the parent first,
// then its children in id order, whichever member id names. It answers the
// member id names, its parent (nil when id is the parent) and the
// children; db.ErrNotFound when there is none. Locking the named child
// before its parent let two siblings' rollbacks each hold one child and
// wait on the other's (a deadlock per pair, each costing a second of
// detection and a retry).
func lockFamily(ctx context.Context, q db.Querier, projectID, id string) (x Redemption, parent *Redemption, kids []Redemption, err error) {
	p, err := scanRedemption(q.QueryRow(ctx, `SELECT `+redemptionColumns+` FROM stacked_redemptions
		WHERE project_id = $1 AND id = (SELECT COALESCE(parent_id, id) FROM stacked_redemptions WHERE project_id = $1 AND id = $2)
		FOR UPDATE`, projectID, id))
	if err != nil {
		return Redemption{}, nil, nil, err
	}
	kids, err = db.Collect(scanRedemption)(q.Query(ctx, `SELECT `+redemptionColumns+` FROM stacked_redemptions
		WHERE project_id = $1 AND parent_id = $2 ORDER BY id FOR UPDATE`, projectID, p.ID))
	if err != nil {
		return Redemption{}, nil, nil, err
	}
	if p.ID == id {
		return p, nil, kids, nil
	}
	for _, k := range kids {
		if k.ID == id {
			return k, &p, kids, nil
		}
	}
	return Redemption{}, nil, nil, db.ErrNotFound // not a child of its parent: cannot be
}

// rollbacksOf are the rollback ids of redemptions, by redemption.
func rollbacksOf(ctx context.Context, q db.Querier, projectID string, ids []string) (map[string]string, error) {
	out := map[string]string{}
	rows, err := q.Query(ctx, `SELECT redemption_id, id FROM stacked_rollbacks WHERE project_id = $1 AND redemption_id = ANY($2::TEXT[])`,
		projectID, ids)
	if err != nil {
		return nil, err
	}
	var r, id string
	_, err = pgx.ForEachRow(rows, []any{&r, &id}, func() error { out[r] = id; return nil })
	return out, err
}

// storedRollback reads a stored rollback's view; db.ErrNotFound when there
// is none.
func storedRollback(ctx context.Context, q db.Querier, projectID, id string) (map[string]any, error) {
	var raw []byte
	if err := q.QueryRow(ctx, `SELECT view FROM stacked_rollbacks WHERE project_id = $1 AND id = $2`, projectID, id).Scan(&raw); err != nil {
		return nil, err
	}
	var v map[string]any
	return v, json.Unmarshal(raw, &v)
}

// markRolledBack queues a redemption's status ROLLED_BACK.
func markRolledBack(b *pgx.Batch, projectID, id string) {
	b.Queue(`UPDATE stacked_redemptions SET status = 'ROLLED_BACK' WHERE project_id = $1 AND id = $2`, projectID, id)
}

func queueRollback(b *pgx.Batch, projectID, id, redemptionID string, parentID *string, view map[string]any, now time.Time) error {
	raw, err := json.Marshal(view)
	if err != nil {
		return err
	}
	b.Queue(`INSERT INTO stacked_rollbacks (project_id, id, redemption_id, parent_id, view, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		projectID, id, redemptionID, parentID, raw, now)
	return nil
}

// listStacked reads the first f.Limit children f admits, and how many it admits.
func listStacked(ctx context.Context, q db.Querier, projectID string, f redemptions.ListFilter) ([]Redemption, int, error) {
	dir := "DESC"
	if f.Asc {
		dir = "ASC"
	}
	where := ` FROM stacked_redemptions
		WHERE project_id = $1 AND parent_id IS NOT NULL AND ($2 = '' OR result = $2) AND ($3 = '' OR campaign_id = $3)
			AND ($4 = '' OR customer_id = $4) AND ($5::TIMESTAMPTZ IS NULL OR created_at > $5)
			AND ($6::TIMESTAMPTZ IS NULL OR created_at < $6)`
	args := []any{projectID, f.Result, f.CampaignID, f.CustomerID, f.After, f.Before}
	var total int
	if err := q.QueryRow(ctx, `SELECT count(*)`+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	rs, err := db.Collect(scanRedemption)(q.Query(ctx, `SELECT `+redemptionColumns+where+
		` ORDER BY created_at `+dir+`, id `+dir+` LIMIT $7`, append(args, f.Limit)...))
	return rs, total, err
}

// current is a redemption's view with its current status and rollbacks.
func current(x Redemption, rollback string) map[string]any {
	v := map[string]any{}
	for k, val := range x.View {
		v[k] = val
	}
	v["status"] = x.Status
	if rollback != "" {
		rel, _ := v["related_redemptions"].(map[string]any)
		if rel == nil {
			rel = map[string]any{"redemptions": []any{}}
		}
		rel["rollbacks"] = []any{map[string]any{"id": rollback, "date": jsonx.Time{Time: x.CreatedAt}}}
		v["related_redemptions"] = rel
	}
	return v
}

var errNotStacked = errors.New("stacked: not a stacked redemption")
