// Package locations serves /v1/locations: a project's named areas, each a
// circle (a centre and a radius) or a polygon (GeoJSON, holes and
// multipolygons included), and answers which of them hold a point for the
// `$in_location` conditions of validation rules (Shapes).
//
// The reference serves locations read-only (they are drawn in its
// Dashboard); Tally, which has no Dashboard, adds POST, PUT and DELETE on
// the same path, with the reference's shape as the body.
package locations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/geo"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/async"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/locations")

// Limits of a project's locations.
const (
	MaxPerProject = 1000
	maxName       = 200
	maxShape      = 256 << 10 // bytes of one shape document
)

// CacheTTL is how long an instance keeps a location's shape: a change made
// on another instance is in force here within it.
const CacheTTL = 2 * time.Second

// Location is a row of locations.
type Location struct {
	ID, Name  string
	Shape     json.RawMessage
	CreatedAt time.Time
	UpdatedAt *time.Time
}

// View is the reference's Location.
type View struct {
	ID        string          `json:"id"`
	Object    string          `json:"object"`
	Name      string          `json:"name"`
	Shape     json.RawMessage `json:"shape"`
	CreatedAt jsonx.Time      `json:"created_at"`
	UpdatedAt *jsonx.Time     `json:"updated_at"`
}

// View renders the location.
func (l Location) View() View {
	return View{ID: l.ID, Object: "location", Name: l.Name, Shape: l.Shape,
		CreatedAt: jsonx.Time{Time: l.CreatedAt}, UpdatedAt: jsonx.Ptr(l.UpdatedAt)}
}

// Request is the body of POST /v1/locations and PUT /v1/locations/{id}.
type Request struct {
	Name  *string         `json:"name"`
	Shape json.RawMessage `json:"shape"`
}

// apply checks r and writes what it names into l.
func (r Request) apply(l *Location, create bool) error {
	if create && (r.Name == nil || len(r.Shape) == 0) {
		return apierr.InvalidPayload("name and shape are required")
	}
	if r.Name != nil {
		if n := utf8.RuneCountInString(*r.Name); strings.TrimSpace(*r.Name) == "" || n > maxName {
			return apierr.InvalidPayload(fmt.Sprintf("name must be 1 to %d characters, not only spaces", maxName))
		}
		l.Name = *r.Name
	}
	if len(r.Shape) > 0 && string(r.Shape) != "null" {
		if len(r.Shape) > maxShape {
			return apierr.InvalidPayload(fmt.Sprintf("shape must be at most %d KiB", maxShape>>10))
		}
		shape, err := normalise(r.Shape)
		if err != nil {
			return apierr.InvalidPayload(err.Error())
		}
		l.Shape = shape
	} else if r.Shape != nil {
		return apierr.InvalidPayload("shape cannot be null")
	}
	return nil
}

// normalise checks a shape and writes it as it reads back: its type, its
// format (filled in when left out) and its distance or geojson, nothing
// else.
func normalise(raw json.RawMessage) (json.RawMessage, error) {
	if _, err := geo.ParseShape(raw); err != nil {
		return nil, err
	}
	var s struct {
		Type     string          `json:"type"`
		Format   string          `json:"format"`
		Distance json.RawMessage `json:"distance,omitempty"`
		GeoJSON  json.RawMessage `json:"geojson,omitempty"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if s.Type == "circle" {
		s.Format, s.GeoJSON = "distance", nil
	} else {
		s.Format, s.Distance = "geojson", nil
	}
	return json.Marshal(s)
}

// KindChanged is the task a location's new shape or deletion queues in
// its transaction, to run once every instance's cache has let go of the
// old shape (CacheTTL): what stored a decision made by the shape
// (segments' members, regional/segments) decides again.
const KindChanged = "locations.changed"

// changed queues KindChanged for location id in tx.
func changed(ctx context.Context, tx pgx.Tx, projectID, id string) error {
	_, err := async.Enqueue(ctx, tx, projectID, async.NewTask{Kind: KindChanged, Payload: map[string]string{"location_id": id},
		RunAfter: time.Now().Add(CacheTTL + time.Second)})
	return err
}

// Service holds the rules of locations and a cache of their shapes.
type Service struct {
	pool   *db.Pool
	clock  *clock.Clock
	shapes *expirable.LRU[string, cached]
}

// cached is a location's parsed shape, or none for a location that does
// not exist (so that a rule naming a deleted one does not read it on every
// request).
type cached struct{ shape geo.Shape }

// NewService returns the location service.
func NewService(pool *db.Pool, clk *clock.Clock) *Service {
	return &Service{pool: pool, clock: clk, shapes: expirable.NewLRU[string, cached](10_000, nil, CacheTTL)}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

const columns = `id, name, shape, created_at, updated_at`

func scan(r pgx.Row) (Location, error) {
	var l Location
	err := r.Scan(&l.ID, &l.Name, &l.Shape, &l.CreatedAt, &l.UpdatedAt)
	return l, err
}

func get(ctx context.Context, q db.Querier, projectID, id string, lock bool) (Location, error) {
	l, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM locations WHERE project_id = $1 AND id = $2`+db.ForUpdate(lock), projectID, id))
	if errors.Is(err, db.ErrNotFound) {
		return l, apierr.NotFound("location", id)
	}
	return l, err
}

// Create stores a new location.
func (s *Service) Create(ctx context.Context, projectID string, r Request) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "locations.Create")
	defer telemetry.End(span, &err)
	if err := r.apply(&Location{}, true); err != nil { // a bad body is refused before a transaction
		return View{}, err
	}
	var v View
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		v, err = s.CreateIn(ctx, tx, projectID, ids.New("loc_"), r)
		return err
	})
	return v, err
}

// CreateIn stores a new location with the id given in the caller's
// transaction: what a campaign template copied from another project
// carries is made in the transaction of the campaign or tier set up from
// it (regional/templates).
func (s *Service) CreateIn(ctx context.Context, tx pgx.Tx, projectID, id string, r Request) (View, error) {
	l := Location{ID: id, CreatedAt: s.now()}
	if err := r.apply(&l, true); err != nil {
		return View{}, err
	}
	// The cap is read in the writer's transaction: two creates at the
	// cap may both pass under read committed, a bound one over.
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM locations WHERE project_id = $1`, projectID).Scan(&n); err != nil {
		return View{}, err
	}
	if n >= MaxPerProject {
		return View{}, apierr.New(400, "limit_exceeded", "Limit exceeded",
			fmt.Sprintf("a project has at most %d locations", MaxPerProject))
	}
	_, err := tx.Exec(ctx, `INSERT INTO locations (project_id, id, name, shape, created_at) VALUES ($1, $2, $3, $4, $5)`,
		projectID, l.ID, l.Name, l.Shape, l.CreatedAt)
	return l.View(), err
}

// Get reads a location.
func (s *Service) Get(ctx context.Context, projectID, id string) (View, error) {
	l, err := get(ctx, s.pool, projectID, id, false)
	return l.View(), err
}

// Update changes a location's name or shape.
func (s *Service) Update(ctx context.Context, projectID, id string, r Request) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "locations.Update")
	defer telemetry.End(span, &err)
	var l Location
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if l, err = get(ctx, tx, projectID, id, true); err != nil {
			return err
		}
		was := l.Shape
		if err := r.apply(&l, false); err != nil {
			return err
		}
		now := s.now()
		l.UpdatedAt = &now
		if _, err = tx.Exec(ctx, `UPDATE locations SET name = $3, shape = $4, updated_at = $5 WHERE project_id = $1 AND id = $2`,
			projectID, id, l.Name, l.Shape, l.UpdatedAt); err != nil {
			return err
		}
		if bytes.Equal(was, l.Shape) {
			return nil // renamed only
		}
		return changed(ctx, tx, projectID, id)
	})
	if err == nil {
		s.shapes.Remove(projectID + "/" + id)
	}
	return l.View(), err
}

// Delete removes a location; a rule naming it no longer matches there.
func (s *Service) Delete(ctx context.Context, projectID, id string) error {
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM locations WHERE project_id = $1 AND id = $2`, projectID, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return apierr.NotFound("location", id)
		}
		return changed(ctx, tx, projectID, id)
	})
	if err != nil {
		return err
	}
	s.shapes.Remove(projectID + "/" + id)
	return nil
}

// Shapes returns the shapes of the project's locations among ids that
// exist, from the cache where it holds them (for at most CacheTTL) and
// the rest in one query. A location that does not exist is left out: a
// point is in none of it.
func (s *Service) Shapes(ctx context.Context, projectID string, ids []string) (map[string]geo.Shape, error) {
	out := make(map[string]geo.Shape, len(ids))
	var miss []string
	for _, id := range ids {
		if c, ok := s.shapes.Get(projectID + "/" + id); ok {
			if c.shape != nil {
				out[id] = c.shape
			}
		} else {
			miss = append(miss, id)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	rows, err := db.Collect(scan)(s.pool.Query(ctx, `SELECT `+columns+` FROM locations WHERE project_id = $1 AND id = ANY($2::TEXT[])`,
		projectID, miss))
	if err != nil {
		return nil, err
	}
	found := map[string]geo.Shape{}
	for _, l := range rows {
		shape, err := geo.ParseShape(l.Shape)
		if err != nil {
			return nil, fmt.Errorf("locations: stored shape of %s does not parse: %w", l.ID, err)
		}
		found[l.ID] = shape
	}
	for _, id := range miss {
		s.shapes.Add(projectID+"/"+id, cached{found[id]})
		if sh := found[id]; sh != nil {
			out[id] = sh
		}
	}
	return out, nil
}

// List reads a page of the project's locations and how many match.
func (s *Service) List(ctx context.Context, projectID string, lq ListQuery) ([]Location, int, bool, error) {
	args := []any{projectID}
	where := ` WHERE project_id = $1`
	if lq.End != nil {
		args = append(args, *lq.End)
		where += fmt.Sprintf(" AND created_at < $%d", len(args))
	}
	if !lq.Filter.Empty() {
		var cond string
		cond, args = lq.Filter.SQL(listFields, args, s.now())
		where += " AND " + cond
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM locations`+where, args...).Scan(&total); err != nil {
		return nil, 0, false, err
	}
	cond, orderBy, args := lq.Keyset("locations", orderKeys[lq.Key], args)
	args = append(args, lq.Limit+1)
	rows, err := db.Collect(scan)(s.pool.Query(ctx, `SELECT `+columns+` FROM locations`+where+cond+
		fmt.Sprintf(" ORDER BY %s LIMIT $%d", orderBy, len(args)), args...))
	if err != nil {
		return nil, 0, false, err
	}
	page, more, _ := listq.Page(rows, lq.Limit, func(l Location) string { return l.ID })
	return page, total, more, nil
}

// IDByName is the id of the project's location of that name, or "" when it
// has none: a template copied from another project matches its locations
// by name (the oldest, should several share it).
func (s *Service) IDByName(ctx context.Context, projectID, name string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT id FROM locations WHERE project_id = $1 AND name = $2 ORDER BY created_at, id LIMIT 1`,
		projectID, name).Scan(&id)
	if errors.Is(err, db.ErrNotFound) {
		return "", nil
	}
	return id, err
}
