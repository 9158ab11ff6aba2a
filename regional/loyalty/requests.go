package loyalty

import (
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

// CardRefOf is the card a request's path names: …/{campaignId}/members/{memberId},
// or …/members/{memberId} with no program.
func CardRefOf(c echo.Context) CardRef {
	return CardRef{Project: httpx.ProjectID(c), Campaign: c.Param("campaignId"), Member: c.Param("memberId")}
}

// ParseTxQuery reads limit (1-100, default 10), order (id or -id), the
// cursor and the filters of a transaction list.
func ParseTxQuery(q url.Values) (TxQuery, error) {
	var tq TxQuery
	var err error
	if tq.Query, err = listq.Parse(q, listq.Spec{}); err != nil {
		return tq, err
	}
	if len(tq.After) > 200 {
		return tq, apierr.InvalidQuery("starting_after_id", "is not a transaction id")
	}
	tq.Filter, err = filters.Parse(q, txFields)
	return tq, err
}
