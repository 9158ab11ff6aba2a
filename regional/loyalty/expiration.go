package loyalty

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tallyhq/tally/regional/webhooks"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
)

// EventPointsExpired is the webhook event type of points expiring.
const EventPointsExpired = "voucher.loyalty_card.points_expired"

// Run expires due points every interval until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration, log func(error)) {
	s.clock.Every(ctx, interval, log, s.Expire)
}

// Expire takes from every card the points whose expiration date is before
// the clock's date, writing a POINTS_EXPIRATION per card: the points of a
// bucket dated D can be spent through D. Cards are taken in batches and
// each is changed under its lock, so replicas sweeping at once never
// expire a bucket twice.
func (s *Service) Expire(ctx context.Context) error {
	return db.EachBatch(ctx, func(ctx context.Context) (bool, error) {
		today := s.clock.Today()
		rows, err := s.pool.Query(ctx, `SELECT project_id, card_id FROM loyalty_point_buckets
			WHERE expires_on < $1 AND points > 0 GROUP BY project_id, card_id LIMIT 100`, today)
		if err != nil {
			return false, err
		}
		type due struct{ project, card string }
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (due, error) {
			var d due
			return d, r.Scan(&d.project, &d.card)
		})
		if err != nil || len(batch) == 0 {
			return true, err
		}
		done := 0
		for _, d := range batch {
			n, err := s.expireCard(ctx, d.project, d.card, today)
			if err != nil {
				return false, err
			}
			done += n
		}
		return done == 0, nil // none expired: what is left belongs to cards being deleted
	})
}

// expireCard expires a card's points dated before today; 1 when it did.
func (s *Service) expireCard(ctx context.Context, projectID, cardID string, today time.Time) (int, error) {
	done := 0
	err := db.InPipe(ctx, s.pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
		done = 0
		var card LockedCard
		var buckets []Bucket
		b := &pgx.Batch{}
		queueLockCard(b, s.attrs, CardRef{Project: projectID, Member: cardID}, &card)
		queueBuckets(b, projectID, cardID, &buckets)
		if err := p.Send(ctx, b).Close(); err != nil {
			return nil, err
		}
		w := &pgx.Batch{}
		if !card.Found {
			return w, nil // its campaign is being deleted, and its buckets with it
		}
		var expired int64
		var rest []Bucket
		for _, bk := range buckets {
			if bk.ExpiresOn != nil && bk.ExpiresOn.Before(today) {
				expired += bk.Points
				w.Queue(`DELETE FROM loyalty_point_buckets WHERE project_id = $1 AND card_id = $2 AND id = $3`, projectID, card.ID, bk.ID)
				continue
			}
			rest = append(rest, bk)
		}
		if expired == 0 {
			return w, nil // another sweep was first
		}
		now := s.Now()
		l := s.LedgerWrite(projectID, w, now)
		l.expire(&card.Card, expired, rest)
		bal := card.BalanceAfter(-expired)
		bal.OperationType = "AUTOMATIC"
		t := Transaction{ID: ids.New("vtx_"), VoucherID: card.ID, CampaignID: card.CampaignID, Type: PointsExpiration,
			CreatedAt: jsonx.Time{Time: now}, Delta: -expired}
		t.Details, _ = json.Marshal(map[string]any{"balance": bal})
		if err := l.Record(ctx, t, &card.Card, card.Campaign); err != nil {
			return nil, err
		}
		done = 1
		return l.Done(), s.notify.Queue(ctx, w, webhooks.Notice{Project: projectID, Type: EventPointsExpired, Entity: card.ID,
			Object: map[string]any{"voucher": card.View(card.Campaign), "balance": bal, "transaction": t}})
	})
	return done, err
}

// PointsBucket is the reference's loyalty points bucket: points on a card
// that expire on one date.
type PointsBucket struct {
	ID         string      `json:"id"`
	VoucherID  string      `json:"voucher_id"`
	CampaignID string      `json:"campaign_id"`
	Bucket     bucketTotal `json:"bucket"`
	Status     string      `json:"status"`
	ExpiresAt  string      `json:"expires_at"`
	CreatedAt  *jsonx.Time `json:"created_at"`
	UpdatedAt  *jsonx.Time `json:"updated_at"`
	Object     string      `json:"object"`
}

type bucketTotal struct {
	TotalPoints int64 `json:"total_points"`
}

// PointsExpiration lists a card's points that will expire, soonest first.
func (s *Service) PointsExpiration(ctx context.Context, ref CardRef, lq listq.Query) ([]PointsBucket, int, error) {
	c, _, err := s.card(ctx, s.pool, ref, false)
	if err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM loyalty_point_buckets WHERE project_id = $1 AND card_id = $2
		AND expires_on IS NOT NULL AND points > 0`, ref.Project, c.ID).Scan(&total); err != nil {
		return nil, 0, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id, points, expires_on, created_at, updated_at FROM loyalty_point_buckets
		WHERE project_id = $1 AND card_id = $2 AND expires_on IS NOT NULL AND points > 0 ORDER BY expires_on LIMIT $3`+lq.OffsetSQL(),
		ref.Project, c.ID, lq.Limit)
	if err != nil {
		return nil, 0, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PointsBucket, error) {
		var id string
		var points int64
		var exp time.Time
		var created, updated *time.Time
		if err := r.Scan(&id, &points, &exp, &created, &updated); err != nil {
			return PointsBucket{}, err
		}
		return PointsBucket{ID: "lopb_" + c.ID + "_" + id, VoucherID: c.ID, CampaignID: c.CampaignID,
			Bucket: bucketTotal{TotalPoints: points}, Status: "ACTIVE", ExpiresAt: exp.Format(time.DateOnly),
			CreatedAt: jsonx.Ptr(created), UpdatedAt: jsonx.Ptr(updated), Object: "loyalty_points_bucket"}, nil
	})
	return out, total, err
}
