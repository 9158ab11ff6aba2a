package management

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/tenancy"
)

// schemaRoutes serve one kind of a project's schemas kept in the directory
// (custom event schemas, metadata schemas). Every route first finds the
// path's project live; a create and an update run in one transaction of
// the directory; what differs by kind is the body, which the kind's
// handlers read and check and hand over as a function.
type schemaRoutes[S, V any] struct {
	param    string // the path's schema id parameter
	resource string // named by a 404
	notFound error  // tenancy's, for a schema not there
	exists   error  // tenancy's, for a create the project already has
	view     func(S) V
	table    tenancy.SchemaTable[S]
	create   func(context.Context, db.Querier, *S) error
	update   func(context.Context, db.Querier, *S) error
}

func (k schemaRoutes[S, V]) missing(err error, id string) error {
	if errors.Is(err, k.notFound) {
		return apierr.NotFound(k.resource, id)
	}
	return err
}

// createIn stores the schema build makes from the body for the project
// (build's error is the body's); a schema the project has already is
// answered by duplicate.
func (k schemaRoutes[S, V]) createIn(h handler, c echo.Context, build func(projectID string) (S, error), duplicate func(S) error) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	s, err := build(p.ID)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	err = db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return k.create(ctx, tx, &s) })
	if errors.Is(err, k.exists) {
		return duplicate(s)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, k.view(s))
}

func (k schemaRoutes[S, V]) listRoute(h handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := h.liveProject(c)
		if err != nil {
			return err
		}
		ss, err := k.table.List(c.Request().Context(), h.pool, p.ID)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, listq.All(ss, k.view))
	}
}

func (k schemaRoutes[S, V]) getRoute(h handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := h.liveProject(c)
		if err != nil {
			return err
		}
		id := c.Param(k.param)
		s, err := k.table.Get(c.Request().Context(), h.pool, p.ID, id)
		if err != nil {
			return k.missing(err, id)
		}
		return c.JSON(http.StatusOK, k.view(s))
	}
}

// updateIn reads the body with bind, which answers the change it asks of
// the stored schema: apply changes s in place and says whether anything
// changed (false: nothing is written), or refuses the change.
func (k schemaRoutes[S, V]) updateIn(h handler, c echo.Context, bind func() (apply func(s *S) (bool, error), err error)) error {
	p, err := h.liveProject(c)
	if err != nil {
		return err
	}
	id := c.Param(k.param)
	apply, err := bind()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var s S
	err = db.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		if s, err = k.table.Get(ctx, tx, p.ID, id); err != nil {
			return err
		}
		changed, err := apply(&s)
		if err != nil || !changed {
			return err
		}
		return k.update(ctx, tx, &s)
	})
	if err != nil {
		return k.missing(err, id)
	}
	return c.JSON(http.StatusOK, k.view(s))
}

func (k schemaRoutes[S, V]) deleteRoute(h handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := h.liveProject(c)
		if err != nil {
			return err
		}
		id := c.Param(k.param)
		ctx := c.Request().Context()
		if err := db.InTx(ctx, h.pool, func(tx pgx.Tx) error { return k.table.Delete(ctx, tx, p.ID, id) }); err != nil {
			return k.missing(err, id)
		}
		return c.NoContent(http.StatusNoContent)
	}
}

// liveProject is the path's project if it is live, else 404 project (for
// every handler of a project's schemas and rules).
func (h handler) liveProject(c echo.Context) (tenancy.Project, error) {
	id := c.Param("projectId")
	p, err := tenancy.GetProject(c.Request().Context(), h.pool, id)
	if err != nil {
		return p, projectNotFound(err, id)
	}
	return p, nil
}

// mergeStart begins a merge of a body's sent properties onto a schema's
// current ones: a copy of current to change, and the sent names sorted, so
// that the same body always meets the same property first (its first error
// is the same one).
func mergeStart[P any](current map[string]P, sent map[string]json.RawMessage) (map[string]P, []string) {
	out := make(map[string]P, len(current)+len(sent))
	maps.Copy(out, current)
	return out, slices.Sorted(maps.Keys(sent))
}
