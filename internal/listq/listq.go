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

// PageOf is Page for rows shown as views: the page rendered by view.
func PageOf[T, V any](rows []T, limit int, id func(T) string, view func(T) V) (page []V, hasMore bool, next string) {
	rows, hasMore, next = Page(rows, limit, id)
	page = make([]V, len(rows))
	for i, r := range rows {
		page[i] = view(r)
	}
	return page, hasMore, next
}

// All is a list answered whole, as the short ones are (a project's
// webhooks, keys, the clusters): every row rendered by view, with the total.
func All[T, V any](rows []T, view func(T) V) List[V] {
	data := make([]V, len(rows))
	for i, r := range rows {
		data[i] = view(r)
	}
	total := len(rows)
	return List[V]{Data: data, Total: &total}
}

// FirstPageOnly refuses `page` past 1: lists whose reference pages by number
// serve the first page that way and later ones by the cursor.
func FirstPageOnly(q url.Values) error {
	p := q.Get("page")
	if p == "" || p == "1" {
		return nil
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 {
		return apierr.InvalidQuery("page", "must be a positive integer")
	}
	return apierr.InvalidQuery("page", "pages past the first are not served; pass the more_starting_after value of the previous page as starting_after_id")
}

// Keyset is how an id-ordered page continues after its cursor: ids greater
// than it in ascending order, smaller in descending.
func Keyset(desc bool) (cmp, dir string) {
	if desc {
		return "<", "DESC"
	}
	return ">", "ASC"
}
