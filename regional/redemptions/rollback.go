package redemptions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/webhooks"
)

// RollbackRequest is the body (and query) of POST /v1/redemptions/{id}/rollback.
type RollbackRequest struct {
	Reason     *string        `json:"reason"`
	TrackingID *string        `json:"tracking_id"`
	Metadata   map[string]any `json:"metadata"`
}

// Rollback undoes a redemption: its points go back to the buckets they
// came from (points whose date has passed meanwhile expire at the next
// sweep), its unit back to the reward's stock, and POINTS_REFUND is
// written; what a CAMPAIGN reward gave is taken back in the same
// transaction (takeBack). A redemption is rolled back once.
func (s *Service) Rollback(ctx context.Context, projectID, id string, r RollbackRequest) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.Rollback")
	defer telemetry.End(span, &err)
	if err := s.CheckMetadata(ctx, projectID, r.Metadata); err != nil {
		return nil, err
	}
	if err := loyalty.CheckText("reason", r.Reason); err != nil {
		return nil, err
	}
	var cardID, status, rewardID string
	var gave []byte
	err = s.pool.QueryRow(ctx, `SELECT card_id, status, issued, reward_id FROM redemptions WHERE project_id = $1 AND id = $2`,
		projectID, id).Scan(&cardID, &status, &gave, &rewardID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("redemption", id)
	}
	if err != nil {
		return nil, err
	}
	if status != "SUCCEEDED" {
		return nil, alreadyRolledBack(id)
	}
	rb := rollingBack{projectID: projectID, id: id, cardID: cardID, rewardID: rewardID, r: r, src: webhooks.SourceOf(ctx)}
	if gave == nil {
		err = db.InPipe(ctx, s.pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
			return s.rollbackIn(ctx, func(b *pgx.Batch) error { return p.Send(ctx, b).Close() }, nil, &rb)
		})
	} else {
		// A CAMPAIGN reward's gift is taken back through other packages'
		// statements: a transaction of its own.
		err = db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
			if err := s.lockGivenFirst(ctx, tx, projectID, cardID, gave); err != nil {
				return err
			}
			w, err := s.rollbackIn(ctx, sendIn(ctx, tx), tx, &rb)
			if err != nil {
				return err
			}
			return tx.SendBatch(ctx, w).Close()
		})
	}
	out := rb.out
	if db.Constraint(err) == "redemption_rollbacks_once" {
		return nil, alreadyRolledBack(id)
	}
	return out, err
}

// rollingBack is a rollback being made: the redemption, what was asked,
// and the answer.
type rollingBack struct {
	projectID, id, cardID string
	rewardID              string // a redemption's reward never changes
	r                     RollbackRequest
	src                   webhooks.Source
	out                   map[string]any
}

// rollbackIn locks the redemption's card with send and answers the
// rollback's writes: the points back, the redemption's status, the
// reward's unit, the rollback row and its notice, and, for a CAMPAIGN
// reward (tx not nil), what it gave taken back.
func (s *Service) rollbackIn(ctx context.Context, send func(*pgx.Batch) error, tx pgx.Tx, rb *rollingBack) (*pgx.Batch, error) {
	projectID, id, cardID, r, src := rb.projectID, rb.id, rb.cardID, rb.r, rb.src
	var red struct {
		found       bool
		status      string
		rewardID    string
		orderID     *string
		points      int64
		taken, view []byte
		issued      []byte
	}
	// The card by id, and the redemption read after the card's lock: a
	// rollback racing this one has committed or not started.
	var card loyalty.LockedCard
	b := &pgx.Batch{}
	s.prog.QueueLockCard(b, loyalty.CardRef{Project: projectID, Member: cardID}, &card)
	var count rewards.Count
	rewards.QueueCount(b, projectID, rb.rewardID, &count)
	b.Queue(`SELECT status, reward_id, order_id, points, taken, view, issued FROM redemptions
		WHERE project_id = $1 AND id = $2`, projectID, id).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			red.found = true
			if err := rows.Scan(&red.status, &red.rewardID, &red.orderID, &red.points, &red.taken, &red.view, &red.issued); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err := send(b); err != nil {
		return nil, err
	}
	if !card.Found {
		return nil, apierr.New(http.StatusBadRequest, "voucher_not_found", "Voucher not found",
			fmt.Sprintf("The card of redemption %s, %s, or its campaign, was deleted; its points cannot be returned.", id, cardID))
	}
	if !red.found {
		return nil, apierr.NotFound("redemption", id)
	}
	if red.status != "SUCCEEDED" {
		return nil, alreadyRolledBack(id)
	}
	var taken []taking
	if err := json.Unmarshal(red.taken, &taken); err != nil {
		return nil, err
	}
	var orig map[string]any
	if err := json.Unmarshal(red.view, &orig); err != nil {
		return nil, err
	}
	now := s.prog.Now()
	w := &pgx.Batch{}
	w.Queue(`UPDATE redemptions SET status = 'ROLLED_BACK' WHERE project_id = $1 AND id = $2`, projectID, id)
	// The points go back to the buckets they were taken from.
	l := s.prog.LedgerWrite(projectID, w, now)
	rbID := ids.New("rr_")
	reward, _ := orig["reward"].(map[string]any)
	rewardRef := map[string]any{"id": red.rewardID, "name": nil}
	if reward != nil {
		rewardRef["name"] = reward["name"]
	}
	details := map[string]any{"redemption": map[string]any{"id": id}, "rollback": map[string]any{"id": rbID}, "reward": rewardRef}
	if ord, ok := orig["order"].(map[string]any); ok && red.orderID != nil {
		details["order"] = map[string]any{"id": ord["id"], "source_id": ord["source_id"]}
	}
	if err := giveBack(ctx, l, &card, taken, red.points, r.Reason, details, now); err != nil {
		return nil, err
	}
	if red.issued != nil {
		if tx == nil {
			return nil, errNeedsTx
		}
		var is issued
		if err := json.Unmarshal(red.issued, &is); err != nil {
			return nil, err
		}
		tb := maps.Clone(details)
		delete(tb, "balance") // the paying card's, which the target's entry replaces
		if err := s.takeBack(ctx, tx, l, projectID, is, tb, now); err != nil {
			return nil, err
		}
	}
	meta := r.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	channel := map[string]any{"channel_type": "API", "channel_id": nil}
	if src.APIKey != nil {
		channel["channel_id"] = src.APIKey.AppID
	}
	out := map[string]any{"id": rbID, "object": "redemption_rollback", "date": jsonx.Time{Time: now},
		"customer_id": orig["customer_id"], "tracking_id": orig["tracking_id"], "metadata": meta, "amount": orig["amount"],
		"redemption": id, "reason": r.Reason, "result": "SUCCESS", "status": "SUCCEEDED", "order": orig["order"],
		"channel": channel, "customer": orig["customer"], "related_object_type": "voucher", "related_object_id": card.ID,
		"voucher": card.View(card.Campaign), "reward": orig["reward"], "loyalty_card": map[string]any{"points": red.points}}
	v, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	w.Queue(`INSERT INTO redemption_rollbacks (project_id, id, redemption_id, view, created_at) VALUES ($1, $2, $3, $4, $5)`,
		projectID, rbID, id, v, now)
	rb.out = out
	l.Done()
	if err := s.notify.Queue(ctx, w, webhooks.Notice{Project: projectID, Type: EventRollbackSucceeded, Entity: rbID,
		Object: map[string]any{"redemption_rollback": out}}); err != nil {
		return nil, err
	}
	// Last, as a redemption counts: the reward may have been deleted since.
	count.Queue(w, projectID, -1)
	return w, nil
}

func alreadyRolledBack(id string) error {
	return apierr.New(http.StatusBadRequest, "already_rolled_back", "Already rolled back",
		fmt.Sprintf("Redemption %s has already been rolled back.", id))
}
