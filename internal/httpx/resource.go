package httpx

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
)

// The handlers of a resource's create, read, update and delete, made from
// its service's methods, so that every resource answers them alike: the
// body bound as Bind does (400 for one that does not read), the project
// the request's identity, the resource named by its path parameter, 200
// with what the service answers, and 204 for a deletion.

// Create handles a POST that makes a resource from its body.
func Create[R, V any](fn func(ctx context.Context, projectID string, r R) (V, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		return WithBody(c, func(r R) (any, error) {
			return fn(c.Request().Context(), ProjectID(c), r)
		})
	}
}

// Read handles a GET of the resource the path parameter param names.
func Read[V any](param string, fn func(ctx context.Context, projectID, id string) (V, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		return Reply(c)(fn(c.Request().Context(), ProjectID(c), c.Param(param)))
	}
}

// Update handles a PUT of the resource the path parameter param names,
// changed as its body says (or a POST that adds to it, as a promotion tier
// to its campaign).
func Update[R, V any](param string, fn func(ctx context.Context, projectID, id string, r R) (V, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		return WithBody(c, func(r R) (any, error) {
			return fn(c.Request().Context(), ProjectID(c), c.Param(param), r)
		})
	}
}

// Delete handles a DELETE of the resource the path parameter param
// names: 204 once it is gone.
func Delete(param string, fn func(ctx context.Context, projectID, id string) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := fn(c.Request().Context(), ProjectID(c), c.Param(param)); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}
