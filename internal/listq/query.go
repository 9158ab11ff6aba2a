package listq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
)

// Spec is what one list accepts.
type Spec struct {
	// DefaultLimit is the page size without `limit` (at most 100).
	DefaultLimit int
	// Orders are the accepted `order` values ("created_at", "-created_at",
	// …); none means the list is ordered by id only ("id", "-id").
	Orders []string
	// DefaultOrder applies without `order`; "" is Orders[0], or "id".
	DefaultOrder string
	// NaturalOrder: without `order` the list keeps its own order (tiers by
	// their points) and Order is "".
	NaturalOrder bool
	// NoOrder: the list has no `order` (the reference defines none); the
	// parameter is ignored as unknown ones are.
	NoOrder bool
	// Pages accepts `page`, as the reference's lists that page by number
	// do: page N is the rows at positions (N-1)×limit+1 to N×limit of the
	// list's order at the time of the read (Query.Offset).
	Pages bool
	// MaxPage is the highest page, the reference's maximum for the list;
	// 0 is MaxPage (100).
	MaxPage int
	// NoCursor: the list has no `starting_after_id` (its rows are few or
	// not ordered by a key a cursor can name); the parameter is ignored as
	// unknown ones are, and numbered pages are the way on.
	NoCursor bool
}

// Query is a list request's paging and order, parsed once by Parse.
type Query struct {
	Limit int
	Order string // as asked, or the default
	Key   string // Order's column, without the sign
	Desc  bool
	After string // starting_after_id: the last id of the previous page
	Page  int    // the numbered page asked for; 0 (none asked) and 1 are the first
}

// Offset is how many rows of the list's order come before the page: the
// rows of the numbered pages before it. It is never more than
// (MaxPage-1) × 100, since Parse refuses a page past the list's maximum.
func (q Query) Offset() int {
	if q.Page <= 1 {
		return 0
	}
	return (q.Page - 1) * q.Limit
}

// OffsetSQL is the OFFSET clause of the page, after its LIMIT: "" on the
// first page (whose statement stays what it was), else " OFFSET n" with n
// the bounded integer Offset, written as a literal so that no caller's
// placeholders move. OFFSET after LIMIT is in both dialects.
func (q Query) OffsetSQL() string {
	if n := q.Offset(); n > 0 {
		return " OFFSET " + strconv.Itoa(n)
	}
	return ""
}

// Window applies the page's offset to rows a list ordered in memory (its
// rows are few: a campaign's earning rules, a card's buckets): the page's
// rows, at most limit, and whether more follow.
func Window[T any](rows []T, q Query) (page []T, hasMore bool) {
	off := min(q.Offset(), len(rows))
	rows = rows[off:]
	if len(rows) > q.Limit {
		return rows[:q.Limit], true
	}
	return rows, false
}

// Parse reads limit, order, page and starting_after_id as s says; every
// list parses them here, so they mean, and fail, the same everywhere.
func Parse(q url.Values, s Spec) (Query, error) {
	var out Query
	var err error
	def := s.DefaultLimit
	if def == 0 {
		def = 10
	}
	if out.Limit, err = Limit(q, def); err != nil {
		return out, err
	}
	orders := s.Orders
	if len(orders) == 0 {
		orders = []string{"id", "-id"}
	}
	dflt := s.DefaultOrder
	if dflt == "" && !s.NaturalOrder {
		dflt = orders[0]
	}
	if s.NoOrder {
		out.Order = dflt
	} else if out.Order, err = Order(q, dflt, orders...); err != nil {
		return out, err
	}
	out.Desc = strings.HasPrefix(out.Order, "-")
	out.Key = strings.TrimPrefix(out.Order, "-")
	if !s.NoCursor {
		out.After = q.Get("starting_after_id")
	}
	if s.Pages {
		max := s.MaxPage
		if max == 0 {
			max = MaxPage
		}
		if q.Has("page") && out.After != "" {
			// Two ways to say where the page starts: refused rather than
			// one silently winning.
			return out, apierr.InvalidQuery("page, starting_after_id", "give one of page and starting_after_id, not both")
		}
		if out.Page, err = PageNumber(q, max, !s.NoCursor); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Keyset is the one place a page's SQL is built: the condition that starts
// the page after its cursor and the ORDER BY that keeps pages stable. key is
// the column (or expression) the list is ordered by, id breaking ties; a
// cursor on another key is read from table by its id within the project
// ($1). The cursor is appended to args; cond is "" on the first page and
// otherwise starts with " AND ".
func (q Query) Keyset(table, key string, args []any) (cond, orderBy string, out []any) {
	cmp, dir := Keyset(q.Desc)
	if key == "" || key == "id" {
		orderBy = "id " + dir
	} else {
		orderBy = key + " " + dir + ", id " + dir
	}
	if q.After == "" {
		return "", orderBy, args
	}
	args = append(args, q.After)
	p := fmt.Sprintf("$%d", len(args))
	if key == "" || key == "id" {
		return " AND id " + cmp + " " + p, orderBy, args
	}
	return fmt.Sprintf(" AND (%s, id) %s (SELECT %s, id FROM %s WHERE project_id = $1 AND id = %s)", key, cmp, key, table, p),
		orderBy, args
}

// List is the one envelope of a list answer: `object` "list", the data under
// its data_ref (never null), `has_more`, `more_starting_after` (null on the
// last page, as the reference's lists that have it type it), and `total`
// where the reference has it.
type List[T any] struct {
	DataRef string
	Data    []T
	Total   *int
	More    bool
	Next    string
}

// MarshalJSON writes the envelope with the data under its name.
func (l List[T]) MarshalJSON() ([]byte, error) {
	data := l.Data
	if data == nil {
		data = []T{}
	}
	ref := l.DataRef
	if ref == "" {
		ref = "data"
	}
	m := map[string]any{"object": "list", "data_ref": ref, ref: data, "has_more": l.More, "more_starting_after": nil}
	if l.Total != nil {
		m["total"] = *l.Total
	}
	if l.More {
		m["more_starting_after"] = l.Next
	}
	// As the services write single objects: "<", ">" and "&" as they are,
	// not \u003c and so on (json.Marshal escapes them, and an encoder
	// that does not cannot undo what a Marshaler already escaped).
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
