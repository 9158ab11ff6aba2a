// Package listq parses the query parameters shared by list endpoints and
// shapes their pages: `limit` (1 to 100), `order`, the `starting_after_id`
// cursor answered by `has_more` and `more_starting_after`, and `page`, the
// reference's numbered pages.
//
// Lists are never paged with an unbounded OFFSET. The cursor is a keyset
// (the rows after the previous page's last, found through the index), so it
// reads any depth at the cost of one page. A numbered page is an OFFSET,
// which PostgreSQL and CockroachDB both serve by reading and dropping the
// rows before it; it is allowed because `page` stops at the reference's
// maximum (100, or 99 on some lists), so a page never skips more than
// 99 × 100 rows, and past that the cursor reads further.
package listq

import (
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

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

// MaxPage is the highest `page` of most of the reference's numbered lists
// (its ParameterPage); vouchers, customers and redemptions stop at 99.
const MaxPage = 100

// PageNumber reads `page`: absent is 1, otherwise an integer from 1 to max.
// Past max the answer says so and, where the list has the cursor
// (cursor), that it reads further.
func PageNumber(q url.Values, max int, cursor bool) (int, error) {
	s := q.Get("page")
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, apierr.InvalidQuery("page", "must be an integer from 1 to "+strconv.Itoa(max)+", got "+strconv.Quote(s))
	}
	if n > max {
		msg := "at most " + strconv.Itoa(max) + " (the reference's maximum), got " + s
		if cursor {
			msg += "; read further with starting_after_id, passing the more_starting_after of the previous page"
		}
		// The reference's key for a page over its cap (interface-notes h6).
		e := apierr.InvalidQuery("page", msg)
		e.Key, e.Message = "page_over_limit", "Page over limit"
		return 0, e
	}
	return n, nil
}

// Keyset is how an id-ordered page continues after its cursor: ids greater
// than it in ascending order, smaller in descending.
func Keyset(desc bool) (cmp, dir string) {
	if desc {
		return "<", "DESC"
	}
	return ">", "ASC"
}

// Unserved refuses the first of params that q gives (a deepObject one as
// name[…] too): a filter the reference documents for a list and the list
// does not apply is a 400 naming it, never ignored, since ignoring it would
// answer rows the client did not select.
func Unserved(q url.Values, params ...string) error {
	keys := slices.Sorted(maps.Keys(q))
	for _, p := range params {
		for _, k := range keys {
			if k == p || strings.HasPrefix(k, p+"[") {
				return apierr.InvalidQuery(k, "this filter is not served on this list yet")
			}
		}
	}
	return nil
}

// Between reads a deepObject time range, name[after] and name[before]
// (each a date-time, RFC 3339, or a date), as the reference's
// created_at and updated_at filters give it; absent bounds are nil.
func Between(q url.Values, name string) (after, before *time.Time, err error) {
	for _, b := range []struct {
		param string
		dst   **time.Time
	}{{name + "[after]", &after}, {name + "[before]", &before}} {
		s := q.Get(b.param)
		if s == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			if v, err = time.Parse(time.DateOnly, s); err != nil {
				return nil, nil, apierr.InvalidQuery(b.param, "must be a date-time (RFC 3339) or a date, got "+strconv.Quote(s))
			}
		}
		*b.dst = &v
	}
	return after, before, nil
}
