// Package rewards keeps a project's rewards: what a loyalty card's points
// buy. A MATERIAL reward is a product (and SKU) handed over; a COIN reward
// pays for an order with points at an exchange ratio; a CAMPAIGN reward
// gives from another campaign (a discount voucher, gift card credits or
// another program's points; regional/redemptions gives them). Loyalty programs
// price rewards in their assignments (package loyalty).
package rewards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/webhooks"
)

// Reward types served.
const (
	Material     = "MATERIAL"
	Coin         = "COIN"
	CampaignType = "CAMPAIGN"
)

// Webhook event types of rewards.
const (
	EventCreated = "reward.created"
	EventUpdated = "reward.updated"
	EventDeleted = "reward.deleted"
)

// Product is a MATERIAL reward's product.
type Product struct {
	ID    string  `json:"id"`
	SKUID *string `json:"sku_id"`
}

// CoinRatio maps PointsRatio points to ExchangeRatio of the currency.
type CoinRatio struct {
	ExchangeRatio float64 `json:"exchange_ratio"`
	PointsRatio   int64   `json:"points_ratio"`
}

// Parameters say what a reward is: one of its members is set.
type Parameters struct {
	Campaign *CampaignReward `json:"campaign,omitempty"`
	Product  *Product        `json:"product,omitempty"`
	Coin     *CoinRatio      `json:"coin,omitempty"`
}

// Attributes describe a reward to people.
type Attributes struct {
	ImageURL    *string `json:"image_url"`
	Description *string `json:"description"`
}

// Attrs are what the rewards table keeps as a document.
type Attrs struct {
	Parameters Parameters     `json:"parameters"`
	Attributes Attributes     `json:"attributes"`
	Metadata   map[string]any `json:"metadata"`
}

// Reward is a stored reward.
type Reward struct {
	ID        string
	Name      string
	Type      string
	Attrs     Attrs
	Stock     *int64
	Redeemed  int64
	CreatedAt time.Time
	UpdatedAt *time.Time
	// Count is how a redemption that read the reward counts in its
	// redeemed (QueueForRedemption with lock).
	Count Count
}

// View is the reference shape of a reward.
type View struct {
	ID         string         `json:"id"`
	Name       string         `json:"name"`
	Stock      *int64         `json:"stock"`
	Redeemed   int64          `json:"redeemed"`
	Attributes Attributes     `json:"attributes"`
	Metadata   map[string]any `json:"metadata"`
	Type       string         `json:"type"`
	Parameters Parameters     `json:"parameters"`
	CreatedAt  jsonx.Time     `json:"created_at"`
	UpdatedAt  *jsonx.Time    `json:"updated_at"`
	Object     string         `json:"object"`
}

// View renders the reward.
func (r Reward) View() View {
	meta := r.Attrs.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	return View{ID: r.ID, Name: r.Name, Stock: r.Stock, Redeemed: r.Redeemed, Attributes: r.Attrs.Attributes, Metadata: meta,
		Type: r.Type, Parameters: r.Attrs.Parameters, CreatedAt: jsonx.Time{Time: r.CreatedAt}, UpdatedAt: jsonx.Ptr(r.UpdatedAt),
		Object: "reward"}
}

// Columns are the reward columns Scan reads, qualified by alias w. Its
// redeemed counts the reward's standing redemptions: the row's count plus
// its counter rows (count.go).
const Columns = `w.id, w.name, w.type, w.attrs, w.stock, w.redeemed + ` + shardsOf + `, w.created_at, w.updated_at`

// QueueForRedemption queues onto b the read of a reward as a redemption
// (lock set) or a validation needs it; into runs if it exists. A
// redemption's read comes after the reward's Count is taken, so that the
// reward it reads keeps the stock it had when its Count was chosen.
func QueueForRedemption(b *pgx.Batch, projectID, id string, lock bool, into func(Reward)) {
	var c Count
	if lock {
		QueueCount(b, projectID, id, &c)
	}
	db.QueueEach(b, Scan, func(w Reward) { w.Count = c; into(w) },
		`SELECT `+Columns+` FROM rewards w WHERE w.project_id = $1 AND w.id = $2`, projectID, id)
}

// IsOutOfStock says err is a reward's stock refusing one more redemption
// (Count.Queue past the stock).
func IsOutOfStock(err error) bool { return db.Constraint(err) == "rewards_in_stock" }

// JoinCoinsInStock is the JOIN, as w (Columns' alias), of the COIN rewards
// still in stock that the rows aliased a name by their project_id and
// reward_id: the rewards a loyalty card can pay an order with.
func JoinCoinsInStock(a string) string {
	return ` JOIN rewards w ON w.project_id = ` + a + `.project_id AND w.id = ` + a + `.reward_id
		AND w.type = 'COIN' AND (w.stock IS NULL OR w.redeemed < w.stock)`
}

// Scan reads a row of Columns.
func Scan(r pgx.Row) (Reward, error) {
	var w Reward
	var attrs []byte
	if err := r.Scan(&w.ID, &w.Name, &w.Type, &attrs, &w.Stock, &w.Redeemed, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return Reward{}, err
	}
	return w, json.Unmarshal(attrs, &w.Attrs)
}

// Get reads a reward in q, or answers its 404.
func Get(ctx context.Context, q db.Querier, projectID, id string) (Reward, error) {
	w, err := Scan(q.QueryRow(ctx, `SELECT `+Columns+` FROM rewards w WHERE w.project_id = $1 AND w.id = $2`, projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return Reward{}, apierr.NotFound("reward", id)
	}
	return w, err
}

// Notifier raises webhook notices in a writer's transaction.
type Notifier interface {
	Emit(ctx context.Context, tx db.Querier, n webhooks.Notice) error
}

// Service holds the rules of rewards.
type Service struct {
	pool        *db.Pool
	notify      Notifier
	clock       *clock.Clock
	assignments Assignments
	meta        MetadataSchemas
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// NewService returns the reward service.
func NewService(pool *db.Pool, notify Notifier, clk *clock.Clock, as Assignments, meta MetadataSchemas) *Service {
	return &Service{pool: pool, notify: notify, clock: clk, assignments: as, meta: meta}
}

// Assignments is what rewards ask of the package that owns the assignments
// of rewards to campaigns (loyalty), which imports this one.
type Assignments interface {
	// QueueDropOfReward queues onto b the deletion of a reward's assignments.
	QueueDropOfReward(b *pgx.Batch, projectID, rewardID string)
	// RewardOf is the reward an assignment assigns, "" when there is none.
	RewardOf(ctx context.Context, q db.Querier, projectID, assignmentID string) (string, error)
}

// Request is the body of POST and PUT /v1/rewards.
type Request struct {
	Name       *string         `json:"name"`
	Parameters *requestParams  `json:"parameters"`
	Stock      json.RawMessage `json:"stock"`
	Attributes *Attributes     `json:"attributes"`
	Metadata   map[string]any  `json:"metadata"`
}

func checkName(n *string) error {
	if n == nil || strings.TrimSpace(*n) == "" || utf8.RuneCountInString(*n) > 200 {
		return apierr.InvalidPayload("name is required: 1 to 200 characters")
	}
	return nil
}

// stock parses the stock field: absent (set false), null or a count.
func stock(raw json.RawMessage) (v *int64, set bool, err error) {
	if len(raw) == 0 {
		return nil, false, nil
	}
	if string(raw) == "null" {
		return nil, true, nil
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil || n < 0 {
		return nil, true, apierr.InvalidPayload("stock must be a whole number of units, 0 or more, or null for unlimited")
	}
	return &n, true, nil
}

func checkAttributes(a *Attributes) error {
	if a == nil {
		return nil
	}
	for name, v := range map[string]*string{"attributes.image_url": a.ImageURL, "attributes.description": a.Description} {
		if v != nil && len(*v) > 2000 {
			return apierr.InvalidPayload(name + " is at most 2000 characters")
		}
	}
	return nil
}

// Create stores a new reward.
func (s *Service) Create(ctx context.Context, projectID string, r Request) (View, error) {
	if err := checkName(r.Name); err != nil {
		return View{}, err
	}
	if r.Parameters == nil {
		return View{}, apierr.InvalidPayload("parameters is required: campaign for a CAMPAIGN reward, product for a MATERIAL reward, coin for a COIN reward")
	}
	typ, params, err := r.Parameters.check(campaignTypes(ctx, s.pool, projectID))
	if err != nil {
		return View{}, err
	}
	st, _, err := stock(r.Stock)
	if err != nil {
		return View{}, err
	}
	if st != nil && typ == Coin {
		return View{}, apierr.InvalidPayload("a COIN reward has no stock")
	}
	if err := checkAttributes(r.Attributes); err != nil {
		return View{}, err
	}
	w := Reward{ID: ids.New("rew_"), Name: *r.Name, Type: typ, Attrs: Attrs{Parameters: params, Metadata: r.Metadata},
		Stock: st, CreatedAt: s.clock.Now()}
	if r.Attributes != nil {
		w.Attrs.Attributes = *r.Attributes
	}
	if err := s.meta.CheckMetadata(ctx, projectID, "reward", w.Attrs.Metadata); err != nil {
		return View{}, err
	}
	attrs, err := json.Marshal(w.Attrs)
	if err != nil {
		return View{}, err
	}
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO rewards (project_id, id, name, type, attrs, stock, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, projectID, w.ID, w.Name, w.Type, attrs, w.Stock, w.CreatedAt); err != nil {
			return err
		}
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventCreated, Entity: w.ID,
			Object: map[string]any{"reward": w.View()}})
	})
	return w.View(), err
}

// Update changes a reward's name, parameters (of the same type), stock,
// attributes and metadata; what the request leaves out stays.
func (s *Service) Update(ctx context.Context, projectID, id string, r Request) (View, error) {
	var out Reward
	// At READ COMMITTED, a lock-first write: the row is locked, which
	// waits for the redemptions in flight that count in its shards
	// (count.go), and then read, counts and all, as they committed.
	err := db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
		var locked bool
		err := tx.QueryRow(ctx, `SELECT true FROM rewards WHERE project_id = $1 AND id = $2 FOR UPDATE`, projectID, id).Scan(&locked)
		if errors.Is(err, db.ErrNotFound) {
			return apierr.NotFound("reward", id)
		}
		if err != nil {
			return err
		}
		w, err := Get(ctx, tx, projectID, id)
		if err != nil {
			return err
		}
		if r.Name != nil {
			if err := checkName(r.Name); err != nil {
				return err
			}
			w.Name = *r.Name
		}
		if r.Parameters != nil {
			typ, params, err := r.Parameters.check(campaignTypes(ctx, tx, projectID))
			if err != nil {
				return err
			}
			if typ != w.Type {
				return apierr.InvalidPayload(fmt.Sprintf("the reward is of type %s; its parameters cannot make it %s", w.Type, typ))
			}
			w.Attrs.Parameters = params
		}
		st, set, err := stock(r.Stock)
		if err != nil {
			return err
		}
		if set {
			if st != nil && w.Type == Coin {
				return apierr.InvalidPayload("a COIN reward has no stock")
			}
			if st != nil && *st < w.Redeemed {
				return apierr.InvalidPayload(fmt.Sprintf("stock cannot be below the %d units already redeemed", w.Redeemed))
			}
			if st != nil && w.Stock == nil {
				// From here its buyers take the row's update, which
				// the stock checks against the row's count (count.go).
				if err := foldCounts(ctx, tx, projectID, w.ID); err != nil {
					return err
				}
			}
			w.Stock = st
		}
		if err := checkAttributes(r.Attributes); err != nil {
			return err
		}
		if r.Attributes != nil {
			if r.Attributes.ImageURL != nil {
				w.Attrs.Attributes.ImageURL = r.Attributes.ImageURL
			}
			if r.Attributes.Description != nil {
				w.Attrs.Attributes.Description = r.Attributes.Description
			}
		}
		if r.Metadata != nil { // replaced whole when sent
			w.Attrs.Metadata = r.Metadata
			if err := s.meta.CheckMetadata(ctx, projectID, "reward", w.Attrs.Metadata); err != nil {
				return err
			}
		}
		now := s.clock.Now()
		w.UpdatedAt = &now
		attrs, err := json.Marshal(w.Attrs)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE rewards SET name = $3, attrs = $4, stock = $5, updated_at = $6
			WHERE project_id = $1 AND id = $2`, projectID, w.ID, w.Name, attrs, w.Stock, now); err != nil {
			return err
		}
		out = w
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventUpdated, Entity: w.ID,
			Object: map[string]any{"reward": w.View()}})
	})
	return out.View(), err
}

// Delete removes a reward and its assignments. Redemptions keep what they
// named.
func (s *Service) Delete(ctx context.Context, projectID, id string) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		w, err := Get(ctx, tx, projectID, id)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		s.assignments.QueueDropOfReward(b, projectID, id)
		queueDropCounts(b, projectID, id)
		b.Queue(`DELETE FROM rewards WHERE project_id = $1 AND id = $2`, projectID, id)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventDeleted, Entity: id,
			Object: map[string]any{"reward": w.View()}})
	})
}

// List returns a page of rewards in id (creation) order, optionally only
// the one with an assignment.
func (s *Service) List(ctx context.Context, projectID, assignmentID string, lq listq.Query) ([]View, int, bool, string, error) {
	where, args := `w.project_id = $1`, []any{projectID}
	if assignmentID != "" {
		rewardID, err := s.assignments.RewardOf(ctx, s.pool, projectID, assignmentID)
		if err != nil {
			return nil, 0, false, "", err
		}
		args = append(args, rewardID) // "" matches no reward
		where += ` AND w.id = $2`
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM rewards w WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, false, "", err
	}
	cond, orderBy, args := lq.Keyset("rewards", "id", args)
	args = append(args, lq.Limit+1)
	ws, err := db.Collect(Scan)(s.pool.Query(ctx, fmt.Sprintf(`SELECT `+Columns+` FROM rewards w WHERE %s%s ORDER BY %s LIMIT $%d%s`,
		where, cond, orderBy, len(args), lq.OffsetSQL()), args...))
	if err != nil {
		return nil, 0, false, "", err
	}
	out, more, next := listq.PageOf(ws, lq.Limit, func(w Reward) string { return w.ID }, Reward.View)
	return out, total, more, next, nil
}

// Register mounts the endpoints on g (the /v1 group).
func Register(g *echo.Group, s *Service) {
	g.POST("/rewards", func(c echo.Context) error {
		return httpx.WithBody(c, func(r Request) (any, error) {
			return s.Create(c.Request().Context(), httpx.ProjectID(c), r)
		})
	})
	g.GET("/rewards", func(c echo.Context) error {
		return httpx.WithList(c, listq.Spec{NoOrder: true, Pages: true}, func(lq listq.Query) (any, error) {
			vs, total, more, next, err := s.List(c.Request().Context(), httpx.ProjectID(c), c.QueryParam("assignment_id"), lq)
			return listq.List[View]{Data: vs, Total: &total, More: more, Next: next}, err
		})
	})
	g.GET("/rewards/:rewardId", func(c echo.Context) error {
		w, err := Get(c.Request().Context(), s.pool, httpx.ProjectID(c), c.Param("rewardId"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, w.View())
	})
	g.PUT("/rewards/:rewardId", func(c echo.Context) error {
		return httpx.WithBody(c, func(r Request) (any, error) {
			return s.Update(c.Request().Context(), httpx.ProjectID(c), c.Param("rewardId"), r)
		})
	})
	g.DELETE("/rewards/:rewardId", func(c echo.Context) error {
		if err := s.Delete(c.Request().Context(), httpx.ProjectID(c), c.Param("rewardId")); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})
}

// ByIDs reads the rewards with ids in q, by id (those gone are absent).
func ByIDs(ctx context.Context, q db.Querier, projectID string, ids []string) (map[string]Reward, error) {
	ws, err := db.Collect(Scan)(q.Query(ctx, `SELECT `+Columns+` FROM rewards w WHERE w.project_id = $1 AND w.id = ANY($2::TEXT[])`, projectID, ids))
	out := make(map[string]Reward, len(ws))
	for _, w := range ws {
		out[w.ID] = w
	}
	return out, err
}
