// Package listq parses the query parameters shared by list endpoints and
// shapes keyset pages: `limit` (1 to 100), `order`, and the
// `starting_after_id` cursor answered by `has_more` and `more_starting_after`.
// Lists are never paged with OFFSET.
package listq

import (
	"net/url"
	"strconv"

	"github.com/tallyhq/tally/internal/apierr"
)

// Limit reads `limit`: absent is def, otherwise an integer from 1 to 100.
func Limit(q url.Values, def int) (int, error) {
	s := q.Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 100 {
		return 0, apierr.InvalidQuery("limit", "must be an integer from 1 to 100, got "+strconv.Quote(s))
	}
	return n, nil
}

// Order reads `order` and checks it is one of allowed; absent is def.
func Order(q url.Values, def string, allowed ...string) (string, error) {
	s := q.Get("order")
	if s == "" {
		return def, nil
	}
	for _, a := range allowed {
		if s == a {
			return s, nil
		}
	}
	msg := "must be one of"
	for i, a := range allowed {
		if i > 0 {
			msg += ","
		}
		msg += " " + a
	}
	return "", apierr.InvalidQuery("order", msg+"; got "+strconv.Quote(s))
}

// Page trims a result fetched with limit+1 rows to limit and reports whether
// more exist and the cursor to ask for them with.
func Page[T any](rows []T, limit int, id func(T) string) (page []T, hasMore bool, next string) {
	if len(rows) > limit {
		rows = rows[:limit]
		return rows, true, id(rows[len(rows)-1])
	}
	return rows, false, ""
}
