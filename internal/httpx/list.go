package httpx

import (
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/listq"
)

// WithList parses the request's list query as s says (see listq.Parse), and
// replies with the page fn makes of it: a list handler's WithBody, so that
// every list refuses a bad limit, order or page before it reads anything.
func WithList(c echo.Context, s listq.Spec, fn func(q listq.Query) (any, error)) error {
	q, err := listq.Parse(c.QueryParams(), s)
	if err != nil {
		return err
	}
	return Reply(c)(fn(q))
}
