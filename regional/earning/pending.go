package earning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/rules"
	"github.com/tallyhq/tally/regional/tiers"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Webhook event types of pending points.
const (
	EventPendingAdded     = "voucher.loyalty_card.pending_points.added"
	EventPendingActivated = "voucher.loyalty_card.pending_points.activated"
	EventPendingCanceled  = "voucher.loyalty_card.pending_points.canceled"
	EventPendingUpdated   = "voucher.loyalty_card.pending_points.updated"
)

// Pending is a pending point entry.
type Pending struct {
	ID          string          `json:"id"`
	VoucherID   string          `json:"voucher_id"`
	CampaignID  string          `json:"campaign_id"`
	CustomerID  string          `json:"customer_id"`
	OrderID     string          `json:"order_id"`
	Points      int64           `json:"points"`
	ActivatesAt string          `json:"activates_at"`
	Details     json.RawMessage `json:"details"`
	CreatedAt   jsonx.Time      `json:"created_at"`
	UpdatedAt   *jsonx.Time     `json:"updated_at"`
	status      string
}

const pendingColumns = `id, card_id, campaign_id, customer_id, order_id, points, activates_at, details, created_at, updated_at, status`

func scanPending(r pgx.Row) (Pending, error) {
	var p Pending
	var at time.Time
	var upd *time.Time
	var details []byte
	err := r.Scan(&p.ID, &p.VoucherID, &p.CampaignID, &p.CustomerID, &p.OrderID, &p.Points, &at, &details, &p.CreatedAt.Time, &upd, &p.status)
	p.ActivatesAt, p.UpdatedAt, p.Details = at.Format(time.DateOnly), jsonx.Ptr(upd), details
	return p, err
}

// accrue is the order.paid task: for each card the order's customer holds,
// each live order.paid rule of the card's campaign earns once, as a
// POINTS_ACCRUAL or, for a rule with a pending period, a pending entry.
// The accrual row written first makes a second run of the task earn
// nothing.
func (s *Service) accrue(ctx context.Context, tx pgx.Tx, t async.Task) error {
	var task orders.PaidTask
	if err := json.Unmarshal(t.Payload, &task); err != nil {
		return fmt.Errorf("loyalty: order.paid payload: %w", err)
	}
	o, err := orders.GetIn(ctx, tx, t.ProjectID, task.OrderID, false)
	if err != nil {
		return err
	}
	cardIDs, err := s.prog.CardsOf(ctx, tx, t.ProjectID, task.CustomerID)
	if err != nil {
		return err
	}
	now := s.Now()
	// A rule earns if the order was paid while it was live and inside its
	// windows, however late its task runs.
	at := task.CreatedAt.Time
	if at.IsZero() {
		at = now
	}
	pass := s.gate(ctx, tx, t.ProjectID, func() (rules.Input, *customers.Customer, error) {
		c, err := customerOf(ctx, tx, t.ProjectID, task.CustomerID)
		ro := &rules.Order{ID: o.ID, Amount: o.Amount, InitialAmount: o.InitialAmount, Items: rules.LinesOf(o.Items), Metadata: o.Metadata}
		if o.SourceID != nil {
			ro.SourceID = *o.SourceID
		}
		return rules.Input{Order: ro, Customer: ruleCustomer(c), Now: at}, c, err
	})
	event := map[string]any{"id": task.EventID, "type": orders.EventPaid}
	orderRef := map[string]any{"id": o.ID, "source_id": o.SourceID}
	return s.eachLockedCard(ctx, tx, t.ProjectID, cardIDs, now, nil, func(card *loyalty.LockedCard, w *pgx.Batch, l *loyalty.LedgerWrite) error {
		rules, err := rulesOf(ctx, tx, t.ProjectID, card.CampaignID, "order.paid")
		if err != nil {
			return err
		}
		// The holder's tier when the order was paid, before its accruals: a
		// rule scoped to a tier earns only in it, and the tier may map its
		// points. An order's own points do not move it to another tier's
		// terms.
		holder := tiers.Of(card.Campaign.Tiers, card.Balance)
		for _, r := range rules {
			pts := r.earns(at, holder, func(p RulePoints) int64 { return p.points(o.Amount, o.TotalAmount()) })
			ok, err := accrues(ctx, tx, r, pts, pass, claimOrderAccrual, t.ProjectID, o.ID, r.ID, card.ID, now)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			rule := ruleRef(r)
			if pp := r.Attrs.PendingPoints; pp != nil {
				ev := map[string]any{"id": task.EventID, "type": orders.EventPaid, "group_id": task.GroupID,
					"entity_id": task.CustomerID, "created_at": task.CreatedAt, "category": "ACTION", "event_source": task.Source}
				details, _ := json.Marshal(withTiers(map[string]any{"event": ev, "earning_rule": rule, "order": orderRef}, holder))
				p := Pending{ID: ids.New("lopp_"), VoucherID: card.ID, CampaignID: card.CampaignID, CustomerID: task.CustomerID,
					OrderID: o.ID, Points: pts, ActivatesAt: s.clock.Today().AddDate(0, 0, pp.PeriodValue).Format(time.DateOnly),
					Details: details, CreatedAt: jsonx.Time{Time: now}}
				w.Queue(`INSERT INTO loyalty_pending_points (project_id, `+pendingColumns+`)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, 'PENDING')`, t.ProjectID, p.ID, p.VoucherID, p.CampaignID,
					p.CustomerID, p.OrderID, p.Points, p.ActivatesAt, details, now)
				l.Pending(&card.Card, pts)
				l.Event(&card.Card, loyalty.EventPendingAddedActivity, map[string]any{"pending_points": p, "order": orderRef})
				if err := s.notify.Queue(ctx, w, webhooks.Notice{Project: t.ProjectID, Type: EventPendingAdded, Entity: p.ID,
					Object: map[string]any{"pending_points": p, "voucher": card.View(card.Campaign)}}); err != nil {
					return err
				}
				continue
			}
			if err := s.credit(ctx, w, l, t.ProjectID, card, r, pts, now, o.SourceID,
				map[string]any{"order": orderRef, "event": event, "earning_rule": rule}, holder); err != nil {
				return err
			}
		}
		return nil
	})
}

// eachLockedCard locks the cards keys name (codes or ids) one at a time, in
// tx and in the order given, and runs fn on each found with a ledger write
// at now on a batch of its own, sent when fn queued anything: the accruals
// of an order and of a custom event alike. also, when not nil, queues
// reads of the card key names after its lock, in the same round trip.
func (s *Service) eachLockedCard(ctx context.Context, tx pgx.Tx, projectID string, keys []string, now time.Time,
	also func(b *pgx.Batch, key string), fn func(card *loyalty.LockedCard, w *pgx.Batch, l *loyalty.LedgerWrite) error) error {
	for _, key := range keys {
		var card loyalty.LockedCard
		b := &pgx.Batch{}
		s.prog.QueueLockCard(b, loyalty.CardRef{Project: projectID, Member: key}, &card)
		if also != nil {
			also(b, key)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if !card.Found {
			continue
		}
		w := &pgx.Batch{}
		l := s.prog.LedgerWrite(projectID, w, now)
		if err := fn(&card, w, l); err != nil {
			return err
		}
		if w.Len() == 0 {
			continue
		}
		if err := tx.SendBatch(ctx, l.Done()).Close(); err != nil {
			return err
		}
	}
	return nil
}

// credit writes an accrual of pts to a locked card by rule r, at now: the
// points with the rule's expiry (or the program's), the POINTS_ACCRUAL entry
// whose details are the balance, details and the holder's tier, and its
// webhook notice, all queued on the ledger write l and its batch w.
func (s *Service) credit(ctx context.Context, w *pgx.Batch, l *loyalty.LedgerWrite, projectID string, card *loyalty.LockedCard,
	r EarningRule, pts int64, now time.Time, sourceID *string, details map[string]any, holder *tiers.Tier) error {
	exp := card.Campaign.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(now)
	if r.Attrs.ExpirationRules != nil {
		exp = r.Attrs.ExpirationRules.Expiry(now)
	}
	_, _, err := l.Credit(ctx, card, loyalty.PointsAccrual, pts, exp, sourceID, withTiers(details, holder))
	return err
}

// withTiers adds to the details of an accrual or a pending entry the tier
// of the holder (nil: none), which is the tier the entry was made in.
func withTiers(details map[string]any, holder *tiers.Tier) map[string]any {
	if holder != nil {
		details["loyalty_tier"] = holder.Ref()
		details["holder_loyalty_tier"] = holder.Ref()
	}
	return details
}

// pendingOf reads a card's pending entry under lock, with the card locked
// first (the ledger's order).
func (s *Service) pendingOf(ctx context.Context, tx pgx.Tx, ref loyalty.CardRef, pendingID string) (loyalty.LockedCard, Pending, error) {
	card, err := s.prog.LockCard(ctx, func(b *pgx.Batch) error { return tx.SendBatch(ctx, b).Close() }, ref, nil)
	if err != nil {
		return card, Pending{}, err
	}
	p, err := scanPending(tx.QueryRow(ctx, `SELECT `+pendingColumns+` FROM loyalty_pending_points
		WHERE project_id = $1 AND id = $2 AND card_id = $3 FOR UPDATE`, ref.Project, pendingID, card.ID))
	if errors.Is(err, db.ErrNotFound) || (err == nil && p.status != "PENDING") {
		return card, Pending{}, apierr.NotFound("pending_points", pendingID)
	}
	return card, p, err
}

// Activate adds a pending entry's points to its card now.
func (s *Service) Activate(ctx context.Context, ref loyalty.CardRef, pendingID string) (loyalty.Balance, error) {
	var out loyalty.Balance
	err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
		card, p, err := s.pendingOf(ctx, tx, ref, pendingID)
		if err != nil {
			return err
		}
		out, err = s.activate(ctx, tx, ref.Project, card, p, "MANUAL")
		return err
	})
	return out, err
}

// activate writes PENDING_POINTS_ACTIVATION for p on its locked card: by the API's activate call
// (operation MANUAL, the only one the reference's answer allows) or by the
// sweep on its date (AUTOMATIC).
func (s *Service) activate(ctx context.Context, tx pgx.Tx, projectID string, card loyalty.LockedCard, p Pending, operation string) (loyalty.Balance, error) {
	now := s.Now()
	exp := card.Campaign.Attrs.Voucher.LoyaltyCard.ExpirationRules.Expiry(now)
	w := &pgx.Batch{}
	w.Queue(`UPDATE loyalty_pending_points SET status = 'ACTIVATED', updated_at = $3 WHERE project_id = $1 AND id = $2`, projectID, p.ID, now)
	l := s.prog.LedgerWrite(projectID, w, now)
	l.Pending(&card.Card, -p.Points)
	l.Add(&card.Card, loyalty.Earned, p.Points, exp)
	bal := card.BalanceAfter(p.Points)
	bal.OperationType = operation
	tr := loyalty.Transaction{ID: ids.New("vtx_"), VoucherID: card.ID, CampaignID: card.CampaignID, Source: ptr("API"),
		Type: loyalty.PendingPointsActivation, CreatedAt: jsonx.Time{Time: now}, Delta: p.Points}
	tr.Details, _ = json.Marshal(map[string]any{"balance": bal, "pending_points": p})
	if err := l.Record(ctx, tr, &card.Card, card.Campaign); err != nil {
		return loyalty.Balance{}, err
	}
	if err := s.notify.Queue(ctx, w, webhooks.Notice{Project: projectID, Type: EventPendingActivated, Entity: p.ID,
		Object: map[string]any{"pending_points": p, "voucher": card.View(card.Campaign), "transaction": tr}}); err != nil {
		return loyalty.Balance{}, err
	}
	return bal, tx.SendBatch(ctx, l.Done()).Close()
}

// Cancel drops a pending entry: its points never reach the card.
func (s *Service) Cancel(ctx context.Context, ref loyalty.CardRef, pendingID string) error {
	projectID := ref.Project
	return db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
		card, p, err := s.pendingOf(ctx, tx, ref, pendingID)
		if err != nil {
			return err
		}
		now := s.Now()
		w := &pgx.Batch{}
		w.Queue(`UPDATE loyalty_pending_points SET status = 'CANCELED', updated_at = $3 WHERE project_id = $1 AND id = $2`, projectID, p.ID, now)
		l := s.prog.LedgerWrite(projectID, w, now)
		l.Pending(&card.Card, -p.Points)
		l.Event(&card.Card, loyalty.EventPendingCanceledActivity, map[string]any{"pending_points": p})
		if err := s.notify.Queue(ctx, w, webhooks.Notice{Project: projectID, Type: EventPendingCanceled, Entity: p.ID,
			Object: map[string]any{"pending_points": p, "voucher": card.View(card.Campaign)}}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, l.Done()).Close()
	})
}

// AdjustPending adds points (negative: removes them) to a pending entry,
// which keeps at least one point.
func (s *Service) AdjustPending(ctx context.Context, ref loyalty.CardRef, pendingID string, points *int64) (map[string]any, error) {
	if points == nil || *points == 0 || *points > 1_000_000_000 || *points < -1_000_000_000 {
		return nil, apierr.InvalidPayload("points is required: a non-zero number of points to add to (or, negative, remove from) the entry")
	}
	projectID := ref.Project
	var out map[string]any
	err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
		card, p, err := s.pendingOf(ctx, tx, ref, pendingID)
		if err != nil {
			return err
		}
		if p.Points+*points < 1 {
			return apierr.InvalidPayload(fmt.Sprintf("the entry holds %d pending points; it must keep at least 1 (cancel it instead)", p.Points))
		}
		now := s.Now()
		p.Points += *points
		p.UpdatedAt = &jsonx.Time{Time: now}
		w := &pgx.Batch{}
		w.Queue(`UPDATE loyalty_pending_points SET points = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`, projectID, p.ID, p.Points, now)
		l := s.prog.LedgerWrite(projectID, w, now)
		l.Pending(&card.Card, *points)
		l.Event(&card.Card, loyalty.EventPendingUpdatedActivity, map[string]any{"pending_points": p})
		if err := s.notify.Queue(ctx, w, webhooks.Notice{Project: projectID, Type: EventPendingUpdated, Entity: p.ID,
			Object: map[string]any{"pending_points": p, "voucher": card.View(card.Campaign)}}); err != nil {
			return err
		}
		out = map[string]any{"points": *points, "total": p.Points, "object": "balance", "operation_type": "MANUAL",
			"related_object": map[string]any{"type": "voucher", "id": card.ID}}
		return tx.SendBatch(ctx, l.Done()).Close()
	})
	return out, err
}

// ListPending returns a page of a card's pending entries (ref.Member set)
// or a campaign's.
func (s *Service) ListPending(ctx context.Context, ref loyalty.CardRef, lq listq.Query) ([]Pending, bool, string, error) {
	var args []any
	var where string
	if ref.Member != "" {
		c, _, err := s.prog.Card(ctx, s.pool, ref)
		if err != nil {
			return nil, false, "", err
		}
		args, where = []any{ref.Project, c.ID}, "card_id = $2"
	} else {
		camp, err := s.prog.Campaign(ctx, s.pool, ref.Project, ref.Campaign)
		if err != nil {
			return nil, false, "", err
		}
		args, where = []any{ref.Project, camp.ID}, "campaign_id = $2"
	}
	cond, orderBy, args := lq.Keyset("loyalty_pending_points", "id", append(args, lq.Limit+1))
	ps, err := db.Collect(scanPending)(s.pool.Query(ctx, `SELECT `+pendingColumns+` FROM loyalty_pending_points
		WHERE project_id = $1 AND `+where+` AND status = 'PENDING'`+cond+` ORDER BY `+orderBy+` LIMIT $3`, args...))
	if err != nil {
		return nil, false, "", err
	}
	ps, more, next := listq.Page(ps, lq.Limit, func(p Pending) string { return p.ID })
	return ps, more, next, nil
}

// Sweep activates the pending entries due by the clock's date. Entries are
// taken with SKIP LOCKED and checked under lock, so replicas sweeping at
// once split the work and none is activated twice.
func (s *Service) Sweep(ctx context.Context) error {
	return db.EachBatch(ctx, func(ctx context.Context) (bool, error) {
		type due struct{ project, id, card string }
		rows, err := s.pool.Query(ctx, `SELECT project_id, id, card_id FROM loyalty_pending_points
			WHERE status = 'PENDING' AND activates_at <= $1 ORDER BY activates_at LIMIT 100`, s.clock.Today())
		if err != nil {
			return false, err
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (due, error) {
			var d due
			return d, r.Scan(&d.project, &d.id, &d.card)
		})
		if err != nil || len(batch) == 0 {
			return true, err
		}
		done := 0
		for _, d := range batch {
			err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
				// pendingOf checks under lock that the entry is still pending.
				card, p, err := s.pendingOf(ctx, tx, loyalty.CardRef{Project: d.project, Member: d.card}, d.id)
				var e *apierr.Error
				if errors.As(err, &e) {
					return nil // its card or campaign is gone, or it was settled meanwhile
				}
				if err != nil {
					return err
				}
				_, err = s.activate(ctx, tx, d.project, card, p, "AUTOMATIC")
				done++
				return err
			})
			if err != nil {
				return false, err
			}
		}
		return done == 0, nil
	})
}

// Run activates due pending points every interval until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration, log func(error)) {
	s.clock.Every(ctx, interval, log, s.Sweep)
}

func registerPending(g *echo.Group, h handler) {
	g.GET("/loyalties/members/:memberId/pending-points", h.listPending)
	g.GET("/loyalties/:campaignId/members/:memberId/pending-points", h.listPending)
	g.GET("/loyalties/:campaignId/pending-points", h.listPending)
	g.POST("/loyalties/members/:memberId/pending-points/:pendingId/activate", h.activatePending)
	g.POST("/loyalties/members/:memberId/pending-points/:pendingId/cancel", h.cancelPending)
	g.POST("/loyalties/members/:memberId/pending-points/:pendingId/balance", h.adjustPending)
}

func (h handler) listPending(c echo.Context) error {
	return httpx.WithList(c, listq.Spec{}, func(lq listq.Query) (any, error) {
		ps, more, next, err := h.svc.ListPending(c.Request().Context(), loyalty.CardRefOf(c), lq)
		return listq.List[Pending]{Data: ps, More: more, Next: next}, err
	})
}

func (h handler) activatePending(c echo.Context) error {
	return httpx.Reply(c)(h.svc.Activate(c.Request().Context(), loyalty.CardRefOf(c), c.Param("pendingId")))
}

func (h handler) cancelPending(c echo.Context) error {
	if err := h.svc.Cancel(c.Request().Context(), loyalty.CardRefOf(c), c.Param("pendingId")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h handler) adjustPending(c echo.Context) error {
	var body struct {
		Points *int64 `json:"points"`
	}
	if err := httpx.Bind(c, &body); err != nil {
		return err
	}
	out, err := h.svc.AdjustPending(c.Request().Context(), loyalty.CardRefOf(c), c.Param("pendingId"), body.Points)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
