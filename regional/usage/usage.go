// Package usage counts a project's API calls per day: the figures plans are
// measured against. It counts requests the router forwarded to the
// application API; webhook sends are outbound and never counted.
package usage

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/ids"
)

type key struct {
	project string
	day     string
}

// Counter counts in memory and adds its counts to the database every few
// seconds, so that counting costs a request nothing but a map update.
type Counter struct {
	pool *db.Pool
	log  *slog.Logger
	mu   sync.Mutex
	n    map[key]int64
	// unsure are flushes that failed: their commit may have happened (a
	// connection lost during COMMIT), so their counts are added again only
	// once the database says their flush id is not there.
	unsure []flush
	// flushing is held for the whole of a flush, so that a flush returns
	// only once every count taken before it is in the database: a reader's
	// flush that found nothing to add must still wait for the ticker's
	// flush that took the counts a moment before and is writing them.
	flushing sync.Mutex
}

// NewCounter returns a counter over a regional database.
func NewCounter(pool *db.Pool, log *slog.Logger) *Counter {
	return &Counter{pool: pool, log: log, n: map[key]int64{}}
}

// Middleware counts every application API request with a project identity.
func (c *Counter) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		if id, ok := identity.From(ec.Request().Context()); ok && id.ProjectID != "" {
			k := key{id.ProjectID, time.Now().UTC().Format("2006-01-02")}
			c.mu.Lock()
			c.n[k]++
			c.mu.Unlock()
		}
		return next(ec)
	}
}

// Run flushes every interval until ctx ends, and once more then.
func (c *Counter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.Flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			c.Flush(ctx)
		}
	}
}

// flush is one flush's counts under the id it chose before its first
// attempt.
type flush struct {
	id     string
	counts map[key]int64
}

// Flush adds the counts gathered so far to the database.
func (c *Counter) Flush(ctx context.Context) {
	c.flushing.Lock()
	defer c.flushing.Unlock()
	// A failed flush may have committed: its id says. Those that did not
	// go back into the counts; while the database cannot say, nothing is
	// flushed (the counts wait in memory).
	if len(c.unsure) > 0 {
		ids := make([]string, len(c.unsure))
		for i, f := range c.unsure {
			ids[i] = f.id
		}
		var done []string
		rows, err := c.pool.Query(ctx, `SELECT id FROM usage_flushes WHERE id = ANY($1)`, ids)
		if err == nil {
			done, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			c.log.Warn("usage: reading whether failed flushes happened", "err", err.Error())
			return
		}
		c.mu.Lock()
		for _, f := range c.unsure {
			if !slices.Contains(done, f.id) {
				for k, n := range f.counts {
					c.n[k] += n
				}
			}
		}
		c.mu.Unlock()
		c.unsure = nil
	}
	c.mu.Lock()
	batch := c.n
	c.n = map[key]int64{}
	c.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	f := flush{id: ids.New("uf_"), counts: batch}
	err := db.InTx(ctx, c.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO usage_flushes (id, flushed_at) VALUES ($1, now()) ON CONFLICT (id) DO NOTHING`, f.id)
		if err != nil || tag.RowsAffected() == 0 {
			return err // an earlier attempt of this flush committed
		}
		for k, n := range f.counts {
			if _, err := tx.Exec(ctx, `INSERT INTO api_usage (project_id, day, calls) VALUES ($1, $2, $3)
				ON CONFLICT (project_id, day) DO UPDATE SET calls = api_usage.calls + excluded.calls`, k.project, k.day, n); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM usage_flushes WHERE id IN (
			SELECT id FROM usage_flushes WHERE flushed_at < now() - INTERVAL '2 days' LIMIT 100)`)
		return err
	})
	if err != nil {
		c.log.Warn("usage: flushing API call counts", "err", err.Error())
		c.unsure = append(c.unsure, f)
	}
}

// Day is one day's figure.
type Day struct {
	Date  string `json:"date"`
	Calls int64  `json:"api_calls"`
}

// RegisterInternal mounts GET /projects/{projectId}/usage on g (/internal/v1).
func (c *Counter) RegisterInternal(g *echo.Group) {
	g.GET("/projects/:projectId/usage", func(ec echo.Context) error {
		c.Flush(ec.Request().Context()) // figures as of now
		rows, err := c.pool.Query(ec.Request().Context(), `SELECT day, calls FROM api_usage
			WHERE project_id = $1 ORDER BY day DESC LIMIT 400`, ec.Param("projectId"))
		if err != nil {
			return err
		}
		days, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Day, error) {
			var d Day
			var day time.Time
			err := r.Scan(&day, &d.Calls)
			d.Date = day.Format("2006-01-02")
			return d, err
		})
		if err != nil {
			return err
		}
		if days == nil {
			days = []Day{}
		}
		return ec.JSON(http.StatusOK, map[string]any{"object": "list", "data_ref": "data", "data": days})
	})
}
