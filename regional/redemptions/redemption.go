package redemptions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/orders"
	"github.com/tallyhq/tally/regional/publications"
	"github.com/tallyhq/tally/regional/rewards"
	"github.com/tallyhq/tally/regional/tiers"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Webhook event types of redemptions.
const (
	EventRedemptionSucceeded = "redemption.succeeded"
	EventRollbackSucceeded   = "redemption.rollback.succeeded"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/redemptions")

// Service pays for rewards with loyalty points and rolls those payments back.
type Service struct {
	prog     *loyalty.Service
	pool     *db.Pool
	notify   loyalty.Notifier
	orders   *orders.Service
	pubs     *publications.Service
	vouchers *vouchers.Service
	meta     MetadataSchemas
	clock    *clock.Clock
	fresh    *expirable.LRU[string, struct{}] // rewards giving a new discount voucher (campaignpath.go)
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// CheckMetadata checks a redemption's (or rollback's) metadata against the
// project's redemption schema: these, and the stacked redemptions and
// rollbacks of regional/engine, are each a new redemption's.
func (s *Service) CheckMetadata(ctx context.Context, projectID string, md map[string]any) error {
	return s.meta.CheckMetadata(ctx, projectID, "redemption", md)
}

// NewService returns the reward assignments and redemptions of the
// loyalty program prog; CAMPAIGN rewards are given through pubs and vs.
func NewService(prog *loyalty.Service, pool *db.Pool, notify loyalty.Notifier, ord *orders.Service, meta MetadataSchemas,
	pubs *publications.Service, vs *vouchers.Service, clk *clock.Clock) *Service {
	return &Service{prog: prog, pool: pool, notify: notify, orders: ord, meta: meta, pubs: pubs, vouchers: vs, clock: clk,
		fresh: expirable.NewLRU[string, struct{}](10_000, nil, freshTTL)}
}

// Now is the service's time: the platform clock, which tests move.
func (s *Service) Now() time.Time { return s.clock.Now() }

// Handler serves the redemption endpoints.
type Handler struct{ svc *Service }

func ptr[T any](v T) *T { return &v }

func outOfStock(rewardID string) error {
	return apierr.New(http.StatusBadRequest, "quantity_exceeded", "Quantity exceeded",
		fmt.Sprintf("Reward %s is out of stock.", rewardID))
}

// RedeemRequest is the body of POST …/members/{memberId}/redemption.
type RedeemRequest struct {
	Reward *struct {
		ID     string `json:"id"`
		Points *int64 `json:"points"`
	} `json:"reward"`
	Order    *orders.Request `json:"order"`
	Metadata map[string]any  `json:"metadata"`
}

// onlyNames says whether an order in a request only names a stored order.
func onlyNames(r *orders.Request) bool {
	return r.Status == nil && r.Amount == nil && r.InitialAmount == nil && r.DiscountAmount == nil && r.Items == nil &&
		r.Metadata == nil && len(r.Customer) == 0 && r.CustomerID == nil && r.ReferrerID == nil
}

// taking is points taken from one bucket, kept with a redemption so that a
// rollback puts them back where they were.
type taking struct {
	Bucket    string     `json:"bucket"`
	Points    int64      `json:"points"`
	ExpiresOn *time.Time `json:"expires_on"`
}

// redemptionReads are what a redemption reads with its card's lock: the
// reward, its assignment to the card's campaign and the card's holder.
type redemptionReads struct {
	reward     rewards.Reward
	hasReward  bool
	assignment Assignment
	assigned   bool
	customer   *customers.Customer
	paidBefore int64 // by pay-with-points redemptions of the order
}

func (rd *redemptionReads) queue(projectID, rewardID string, order *orders.View) func(b *pgx.Batch, key string) {
	return func(b *pgx.Batch, key string) {
		if order != nil {
			// The order is locked after the card, so that two redemptions
			// paying for it one after the other each see what the other
			// paid.
			orders.QueueLock(b, projectID, order.ID)
			b.Queue(`SELECT coalesce(sum((view->>'amount')::INT8), 0) FROM redemptions
				WHERE project_id = $1 AND order_id = $2 AND status = 'SUCCEEDED'`, projectID, order.ID).QueryRow(func(row pgx.Row) error {
				return row.Scan(&rd.paidBefore)
			})
		}
		rewards.QueueForRedemption(b, projectID, rewardID, true, func(w rewards.Reward) { rd.reward, rd.hasReward = w, true })
		db.QueueEach(b, scanAssignment, func(a Assignment) { rd.assignment, rd.assigned = a, true },
			`SELECT `+assignmentColumns+` FROM reward_assignments WHERE project_id = $1 AND campaign_id = `+
				loyalty.CardColumnKeyed("campaign_id", key)+` AND reward_id = $3`, projectID, key, rewardID)
		customers.QueueGetByIDOf(b, projectID, loyalty.CardColumnKeyed("holder_id", key), []any{key}, func(c customers.Customer) { rd.customer = &c })
	}
}

// price is what the reward costs the card in points, and, for a COIN
// reward, the amount of the order they pay.
func price(w rewards.Reward, a Assignment, holder *tiers.Tier, asked *int64, order *orders.View, paidBefore int64) (points int64, amount *int64, err error) {
	if w.Type != rewards.Coin {
		if asked != nil {
			return 0, nil, apierr.InvalidPayload("reward.points is for COIN rewards, which take as many points as asked; a " + w.Type + " reward has its price")
		}
		points = *a.Points
		if m, ok := holder.RewardMapping(w.ID); ok {
			points = m.Apply(points)
		}
		return points, nil, nil
	}
	c := w.Attrs.Parameters.Coin
	if order == nil || order.Amount == nil || *order.Amount <= 0 {
		return 0, nil, apierr.InvalidPayload("a COIN reward pays for an order: order with an amount is required")
	}
	due := *order.Amount
	if order.TotalAmount != nil {
		due = *order.TotalAmount
	}
	// What earlier pay-with-points redemptions of the order paid is not due.
	due -= paidBefore
	if due <= 0 {
		return 0, nil, apierr.InvalidPayload(fmt.Sprintf("order %s is already paid for with points", order.ID))
	}
	// An amount in the smallest currency unit is worth this many points.
	perUnit := coinPerUnit(c)
	need := max(1, int64(math.Ceil(float64(due)*perUnit)))
	points = need
	if asked != nil {
		if *asked < 1 || *asked > need {
			return 0, nil, apierr.InvalidPayload(fmt.Sprintf("reward.points must be 1 to %d: the points that pay the %d still due on the order", need, due))
		}
		points = *asked
	}
	paid := min(due, int64(math.Floor(float64(points)/perUnit)))
	return points, &paid, nil
}

// Redeem pays for a reward with a card's points: the redemption, its
// POINTS_REDEMPTION entry, the card's figures and the reward's stock are
// written in one transaction of two round trips, as a balance change is.
func (s *Service) Redeem(ctx context.Context, ref loyalty.CardRef, r RedeemRequest) (_ map[string]any, err error) {
	ctx, span := tracer.Start(ctx, "loyalty.Redeem")
	defer telemetry.End(span, &err)
	projectID := ref.Project
	if err := s.CheckMetadata(ctx, projectID, r.Metadata); err != nil {
		return nil, err
	}
	if r.Reward == nil || strings.TrimSpace(r.Reward.ID) == "" {
		return nil, apierr.InvalidPayload("reward.id is required: the reward to pay for with points")
	}
	var order *orders.View
	if r.Order != nil {
		o, err := s.redemptionOrder(ctx, ref, r.Order)
		if err != nil {
			return nil, err
		}
		order = &o
	}
	in := redeeming{ref: ref, r: r, order: order, src: webhooks.SourceOf(ctx), skipPipe: s.givesFresh(projectID, r.Reward.ID)}
	// Two round trips at READ COMMITTED under the card's lock (LockCard's
	// batch with BEGIN, the writes with COMMIT); a CAMPAIGN reward, which
	// publishes and credits through other packages' statements, runs again
	// as a transaction of its own (errNeedsTx), or at once when it is known
	// to give a new discount voucher (campaignpath.go).
	if !in.skipPipe {
		err = db.InPipe(ctx, s.pool, pgx.ReadCommitted, func(ctx context.Context, p *db.Pipe) (*pgx.Batch, error) {
			return s.redeemIn(ctx, func(b *pgx.Batch) error { return p.Send(ctx, b).Close() }, nil, &in)
		})
	}
	if in.skipPipe || errors.Is(err, errNeedsTx) {
		err = s.redeemInTx(ctx, &in)
	}
	if rewards.IsOutOfStock(err) {
		return nil, outOfStock(r.Reward.ID)
	}
	return in.view, err
}

// redeeming is a redemption being made: what it was asked, and its answer.
type redeeming struct {
	ref   loyalty.CardRef
	r     RedeemRequest
	order *orders.View
	src   webhooks.Source
	view  map[string]any
	// What the pipe found before handing over to a transaction
	// (errNeedsTx): the paying card's code, its holder and the reward's
	// campaign, so that the transaction locks in code order (lockBefore).
	payCode, holder string
	gives           *rewards.CampaignReward
	// skipPipe: the reward was known to give a new discount voucher, which
	// locks nothing before the card, so the transaction ran at once.
	skipPipe bool
}

// errNeedsTx says a redemption in a pipe reached a CAMPAIGN reward, which
// is given in a transaction (tx) of its own.
var errNeedsTx = errors.New("redemptions: a CAMPAIGN reward is given in a transaction")

// redeemIn locks the card with send and answers the redemption's writes:
// the points taken, the entry, the redemption row and its notice, and,
// for a CAMPAIGN reward (tx not nil), what it gives.
func (s *Service) redeemIn(ctx context.Context, send func(*pgx.Batch) error, tx pgx.Tx, in *redeeming) (*pgx.Batch, error) {
	ref, r, order, projectID := in.ref, in.r, in.order, in.ref.Project
	var buckets []loyalty.Bucket
	var rd redemptionReads
	card, err := s.prog.LockCard(ctx, send, ref, &buckets, rd.queue(ref.Project, r.Reward.ID, order))
	if err != nil {
		return nil, err
	}
	if !rd.hasReward {
		return nil, apierr.NotFound("reward", r.Reward.ID)
	}
	if !rd.assigned {
		return nil, apierr.New(http.StatusBadRequest, "reward_not_assigned", "Reward not assigned",
			fmt.Sprintf("Reward %s is not offered by campaign %s.", rd.reward.ID, card.Campaign.Name))
	}
	w, camp := rd.reward, card.Campaign
	holder := tiers.Of(camp.Tiers, card.Balance)
	pts, amount, err := price(w, rd.assignment, holder, r.Reward.Points, order, rd.paidBefore)
	if err != nil {
		return nil, err
	}
	if w.Stock != nil && w.Redeemed >= *w.Stock {
		return nil, outOfStock(w.ID)
	}
	if card.Balance < pts {
		return nil, loyalty.PointsExceeded(card.Card, pts)
	}
	if w.Type == rewards.CampaignType && (tx == nil || (in.skipPipe && !s.noteFresh(projectID, w))) {
		in.payCode, in.gives = card.Code, w.Attrs.Parameters.Campaign
		if card.HolderID != nil {
			in.holder = *card.HolderID
		}
		if tx == nil {
			s.noteFresh(projectID, w)
		}
		return nil, errNeedsTx
	}
	now := s.prog.Now()
	wr := &pgx.Batch{}
	l := s.prog.LedgerWrite(projectID, wr, now)
	rest, err := l.Take(&card.Card, loyalty.Redeemed, pts, buckets)
	if err != nil {
		return nil, err
	}
	id := ids.New("r_")
	details := map[string]any{"redemption": map[string]any{"id": id}, "reward": map[string]any{"id": w.ID, "name": w.Name}}
	if order != nil {
		details["order"] = map[string]any{"id": order.ID, "source_id": order.SourceID}
	}
	var given any
	var gave *issued
	if w.Type == rewards.CampaignType {
		g, is, err := s.give(ctx, tx, l, projectID, card, w, id, now)
		if err != nil {
			return nil, err
		}
		given, gave = g, &is
	}
	in.view = s.redemptionView(in.src, id, now, card, w, rd, pts, amount, order, r.Metadata)
	if gave != nil {
		in.view["reward"].(map[string]any)["voucher"] = given
	}
	taken := takings(buckets, rest)
	if err := queueRedemption(wr, projectID, id, card.Card, w.ID, order, pts, taken, in.view, gave, now); err != nil {
		return nil, err
	}
	if err := record(ctx, l, &card, loyalty.PointsRedemption, -pts, nil, details, now); err != nil {
		return nil, err
	}
	if err := s.notify.Queue(ctx, wr, webhooks.Notice{Project: projectID, Type: EventRedemptionSucceeded, Entity: id,
		Object: map[string]any{"redemption": in.view}}); err != nil {
		return nil, err
	}
	l.Done()
	// Last before COMMIT: a reward with a stock updates its row, and
	// holds that row's lock from here to the commit, its stock refusing
	// it when others took the last units; one without adds to a shard.
	// So does the count of the vouchers a CAMPAIGN reward made
	// (campaignpath.go).
	campaigns.QueueDeferredCounts(ctx, wr)
	w.Count.Queue(wr, projectID, +1)
	return wr, nil
}

// redemptionOrder is the order a redemption is for: the stored one it
// names, or the one it describes, saved (with the card's holder as its
// customer when it names none).
func (s *Service) redemptionOrder(ctx context.Context, ref loyalty.CardRef, r *orders.Request) (orders.View, error) {
	projectID := ref.Project
	if onlyNames(r) {
		key := r.ID
		if key == nil {
			key = r.SourceID
		}
		if key == nil {
			return orders.View{}, apierr.InvalidPayload("order must name a stored order (id or source_id) or describe one (amount, items)")
		}
		return s.orders.Get(ctx, projectID, *key)
	}
	if len(r.Customer) == 0 && r.CustomerID == nil {
		holder, err := s.prog.HolderOf(ctx, ref)
		if err != nil {
			return orders.View{}, err
		}
		r.CustomerID = holder
	}
	return s.orders.Upsert(ctx, projectID, *r)
}

// takings are the points taken from buckets (before) to leave rest.
func takings(before, rest []loyalty.Bucket) []taking {
	left := map[string]int64{}
	for _, b := range rest {
		left[b.ID] = b.Points
	}
	var out []taking
	for _, b := range before {
		if n := b.Points - left[b.ID]; n > 0 {
			out = append(out, taking{Bucket: b.ID, Points: n, ExpiresOn: b.ExpiresOn})
		}
	}
	return out
}

func queueRedemption(b *pgx.Batch, projectID, id string, card loyalty.Card, rewardID string, order *orders.View, pts int64,
	taken []taking, view map[string]any, gave *issued, now time.Time) error {
	var orderID *string
	if order != nil {
		orderID = &order.ID
	}
	tk, err := json.Marshal(taken)
	if err != nil {
		return err
	}
	v, err := json.Marshal(view)
	if err != nil {
		return err
	}
	var is []byte // NULL but for a CAMPAIGN reward
	if gave != nil {
		if is, err = json.Marshal(gave); err != nil {
			return err
		}
	}
	b.Queue(`INSERT INTO redemptions (project_id, id, card_id, campaign_id, reward_id, order_id, points, status, taken, view, issued, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'SUCCEEDED', $8, $9, $10, $11)`, projectID, id, card.ID, card.CampaignID, rewardID, orderID,
		pts, tk, v, is, now)
	return nil
}

// redemptionView is the reference's redemption object.
func (s *Service) redemptionView(src webhooks.Source, id string, now time.Time, card loyalty.LockedCard, w rewards.Reward, rd redemptionReads,
	pts int64, amount *int64, order *orders.View, meta map[string]any) map[string]any {
	if meta == nil {
		meta = map[string]any{}
	}
	var custID, tracking any
	var cust any
	if rd.customer != nil {
		custID, tracking, cust = rd.customer.ID, rd.customer.SourceID, rd.customer.Simple()
	}
	channel := map[string]any{"channel_type": "API", "channel_id": nil}
	if src.APIKey != nil {
		channel["channel_id"] = src.APIKey.AppID
	}
	reward := rewardRef(w, rd.assignment.ID, tiers.Of(card.Campaign.Tiers, card.Balance+pts))
	reward["customer"] = cust
	var ord any
	if order != nil {
		ord = order
	}
	return map[string]any{"id": id, "object": "redemption", "date": jsonx.Time{Time: now}, "customer_id": custID,
		"tracking_id": tracking, "metadata": meta, "amount": amount, "redemption": nil, "result": "SUCCESS", "status": "SUCCEEDED",
		"order": ord, "channel": channel, "customer": cust, "related_object_type": "voucher", "related_object_id": card.ID,
		"voucher": card.View(card.Campaign), "reward": reward, "loyalty_card": map[string]any{"points": pts}}
}

// GetRedemption returns a redemption (r_) with its present status and
// rollback, or a rollback (rr_).
func (s *Service) GetRedemption(ctx context.Context, projectID, id string) (map[string]any, error) {
	var raw []byte
	var status string
	var rbID *string
	var rbAt *time.Time
	err := s.pool.QueryRow(ctx, `SELECT r.view, r.status, b.id, b.created_at FROM redemptions r
		LEFT JOIN redemption_rollbacks b ON b.project_id = r.project_id AND b.redemption_id = r.id
		WHERE r.project_id = $1 AND r.id = $2`, projectID, id).Scan(&raw, &status, &rbID, &rbAt)
	if errors.Is(err, db.ErrNotFound) {
		err = s.pool.QueryRow(ctx, `SELECT view FROM redemption_rollbacks WHERE project_id = $1 AND id = $2`, projectID, id).Scan(&raw)
		status = ""
	}
	if errors.Is(err, db.ErrNotFound) {
		return nil, apierr.NotFound("redemption", id)
	}
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	if status != "" {
		v["status"] = status
	}
	if rbID != nil {
		v["related_redemptions"] = map[string]any{"redemptions": []any{},
			"rollbacks": []any{map[string]any{"id": *rbID, "date": jsonx.Time{Time: *rbAt}}}}
	}
	return v, nil
}

// Register mounts the redemption endpoints on g (the /v1 group).
func Register(g *echo.Group, s *Service) {
	h := Handler{s}
	registerAssignments(g, h)
	registerByReward(g, h)
	registerMember(g, h)
	registerTier(g, h)
	g.POST("/loyalties/members/:memberId/redemption", h.redeem)
	g.POST("/loyalties/:campaignId/members/:memberId/redemption", h.redeem)
}

func (h Handler) redeem(c echo.Context) error {
	return httpx.WithBody(c, func(r RedeemRequest) (any, error) {
		return h.svc.Redeem(c.Request().Context(), loyalty.CardRefOf(c), r)
	})
}

// Counts are a loyalty program's reward redemptions made within p, and
// their rollbacks made within p.
func (s *Service) Counts(ctx context.Context, projectID, campaignID string, p campaigns.Period) (redeemed, rolledBack int64, err error) {
	if redeemed, err = p.Count(ctx, s.pool, `SELECT count(*) FROM redemptions WHERE project_id = $1 AND campaign_id = $2`,
		"created_at", projectID, campaignID); err != nil {
		return 0, 0, err
	}
	rolledBack, err = p.Count(ctx, s.pool, `SELECT count(*) FROM redemption_rollbacks b JOIN redemptions r
		ON r.project_id = b.project_id AND r.id = b.redemption_id WHERE b.project_id = $1 AND r.campaign_id = $2`,
		"b.created_at", projectID, campaignID)
	return redeemed, rolledBack, err
}

// ListFilter narrows a list of redemptions (GET /v1/redemptions).
type ListFilter struct {
	Result     string // SUCCESS or FAILURE ("": both)
	CampaignID string
	CustomerID string
	After      *time.Time
	Before     *time.Time
	Asc        bool
	Limit      int // rows to read, from the first
}

// ListViews reads loyalty reward redemptions as the API shows them, with
// their present status, newest first (or oldest with Asc), and their
// creation times. Reward redemptions always succeed.
func (s *Service) ListViews(ctx context.Context, projectID string, f ListFilter) ([]map[string]any, []time.Time, int, error) {
	if f.Result == "FAILURE" {
		return nil, nil, 0, nil
	}
	dir := "DESC"
	if f.Asc {
		dir = "ASC"
	}
	where := ` FROM redemptions
		WHERE project_id = $1 AND ($2 = '' OR campaign_id = $2) AND ($3 = '' OR view->>'customer_id' = $3)
			AND ($4::TIMESTAMPTZ IS NULL OR created_at > $4) AND ($5::TIMESTAMPTZ IS NULL OR created_at < $5)`
	args := []any{projectID, f.CampaignID, f.CustomerID, f.After, f.Before}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*)`+where, args...).Scan(&total); err != nil {
		return nil, nil, 0, err
	}
	rows, err := s.pool.Query(ctx, `SELECT view, status, created_at`+where+` ORDER BY created_at `+dir+`, id `+dir+` LIMIT $6`,
		append(args, f.Limit)...)
	if err != nil {
		return nil, nil, 0, err
	}
	var views []map[string]any
	var times []time.Time
	var raw []byte
	var status string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&raw, &status, &at}, func() error {
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		v["status"] = status
		views, times = append(views, v), append(times, at)
		return nil
	})
	return views, times, total, err
}
