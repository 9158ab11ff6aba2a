package listq_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/listq"
)

func TestParse(t *testing.T) {
	spec := listq.Spec{Orders: []string{"-created_at", "created_at", "updated_at"}, Pages: true}
	for _, c := range []struct {
		query string
		want  listq.Query
		fails string // the start of the 400's details
	}{
		{"", listq.Query{Limit: 10, Order: "-created_at", Key: "created_at", Desc: true, Page: 1}, ""},
		{"limit=5&order=updated_at&starting_after_id=x", listq.Query{Limit: 5, Order: "updated_at", Key: "updated_at", After: "x", Page: 1}, ""},
		{"limit=5&page=3", listq.Query{Limit: 5, Order: "-created_at", Key: "created_at", Desc: true, Page: 3}, ""},
		{"page=100", listq.Query{Limit: 10, Order: "-created_at", Key: "created_at", Desc: true, Page: 100}, ""},
		{"limit=0", listq.Query{}, "limit:"},
		{"limit=101", listq.Query{}, "limit:"},
		{"order=id", listq.Query{}, "order:"},
		{"page=0", listq.Query{}, "page: must be an integer from 1 to 100"},
		{"page=-1", listq.Query{}, "page: must be"},
		{"page=two", listq.Query{}, "page: must be"},
		{"page=1e400", listq.Query{}, "page: must be"},
		{"page=101", listq.Query{}, "page: at most 100 (the reference's maximum), got 101; read further with starting_after_id"},
		// Two ways to say where the page starts, even the first.
		{"page=2&starting_after_id=x", listq.Query{}, "page, starting_after_id:"},
		{"page=1&starting_after_id=x", listq.Query{}, "page, starting_after_id:"},
	} {
		q, _ := url.ParseQuery(c.query)
		got, err := listq.Parse(q, spec)
		if c.fails != "" {
			var e *apierr.Error
			if !errors.As(err, &e) || e.Status != 400 || !strings.HasPrefix(e.Details, c.fails) {
				t.Errorf("%q: %v, want a 400 starting %q", c.query, err, c.fails)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v %v, want %+v", c.query, got, err, c.want)
		}
	}
	q, _ := url.ParseQuery("order=bogus&page=7")
	if got, err := listq.Parse(q, listq.Spec{NoOrder: true, DefaultOrder: "-id"}); err != nil || !got.Desc || got.Key != "id" || got.Page != 0 {
		t.Errorf("NoOrder, no pages: %+v %v", got, err)
	}
}

// A list's maximum page is the reference's: 99 on some lists, and past it
// a list without the cursor does not point to one.
func TestParseMaxPage(t *testing.T) {
	for _, c := range []struct {
		spec  listq.Spec
		query string
		fails string
	}{
		{listq.Spec{Pages: true, MaxPage: 99}, "page=99", ""},
		{listq.Spec{Pages: true, MaxPage: 99}, "page=100", "page: at most 99 (the reference's maximum), got 100; read further"},
		{listq.Spec{Pages: true, NoCursor: true}, "page=101", "page: at most 100 (the reference's maximum), got 101"},
		// No cursor: starting_after_id is an unknown parameter, ignored.
		{listq.Spec{Pages: true, NoCursor: true}, "page=2&starting_after_id=x", ""},
	} {
		q, _ := url.ParseQuery(c.query)
		got, err := listq.Parse(q, c.spec)
		if c.fails == "" {
			if err != nil || got.After != "" {
				t.Errorf("%+v %q: %+v %v", c.spec, c.query, got, err)
			}
			continue
		}
		var e *apierr.Error
		if !errors.As(err, &e) || !strings.HasPrefix(e.Details, c.fails) || (c.spec.NoCursor && strings.Contains(e.Details, "starting_after_id")) {
			t.Errorf("%+v %q: %v, want %q", c.spec, c.query, err, c.fails)
		}
	}
}

// Page N starts after the N-1 pages before it; the first page's statement
// has no OFFSET, and the deepest is bounded by the maximum.
func TestOffset(t *testing.T) {
	for _, c := range []struct {
		q   listq.Query
		off int
		sql string
	}{
		{listq.Query{Limit: 10}, 0, ""},
		{listq.Query{Limit: 10, Page: 1}, 0, ""},
		{listq.Query{Limit: 10, Page: 2}, 10, " OFFSET 10"},
		{listq.Query{Limit: 100, Page: 100}, 9900, " OFFSET 9900"},
	} {
		if off, sql := c.q.Offset(), c.q.OffsetSQL(); off != c.off || sql != c.sql {
			t.Errorf("%+v: %d %q, want %d %q", c.q, off, sql, c.off, c.sql)
		}
	}
}

func TestWindow(t *testing.T) {
	rows := []int{1, 2, 3, 4, 5}
	for _, c := range []struct {
		q    listq.Query
		want []int
		more bool
	}{
		{listq.Query{Limit: 2}, []int{1, 2}, true},
		{listq.Query{Limit: 2, Page: 2}, []int{3, 4}, true},
		{listq.Query{Limit: 2, Page: 3}, []int{5}, false},
		{listq.Query{Limit: 5}, []int{1, 2, 3, 4, 5}, false},
		{listq.Query{Limit: 2, Page: 9}, []int{}, false}, // past the end: empty
	} {
		got, more := listq.Window(rows, c.q)
		if !reflect.DeepEqual(got, c.want) || more != c.more {
			t.Errorf("%+v: %v %v, want %v %v", c.q, got, more, c.want, c.more)
		}
	}
}

// A filter a list does not apply is refused by name, deepObject forms too.
func TestUnserved(t *testing.T) {
	for _, c := range []struct{ query, fails string }{
		{"limit=5&page=2", ""},
		{"code=X", "code:"},
		{"created_at%5Bbefore%5D=2024-01-01T00:00:00Z", "created_at[before]:"},
		{"created_atx=1", ""},
	} {
		q, _ := url.ParseQuery(c.query)
		err := listq.Unserved(q, "code", "created_at")
		var e *apierr.Error
		if c.fails == "" && err != nil || c.fails != "" && (!errors.As(err, &e) || !strings.HasPrefix(e.Details, c.fails)) {
			t.Errorf("%q: %v, want %q", c.query, err, c.fails)
		}
	}
}

func TestKeyset(t *testing.T) {
	for _, c := range []struct {
		q           listq.Query
		key         string
		cond, order string
		args        []any
	}{
		{listq.Query{}, "id", "", "id ASC", []any{"p"}},
		{listq.Query{Desc: true, After: "c9"}, "id", " AND id < $2", "id DESC", []any{"p", "c9"}},
		{listq.Query{After: "c9"}, "coalesce(updated_at, created_at)",
			" AND (coalesce(updated_at, created_at), id) > (SELECT coalesce(updated_at, created_at), id FROM t WHERE project_id = $1 AND id = $2)",
			"coalesce(updated_at, created_at) ASC, id ASC", []any{"p", "c9"}},
	} {
		cond, order, args := c.q.Keyset("t", c.key, []any{"p"})
		if cond != c.cond || order != c.order || !reflect.DeepEqual(args, c.args) {
			t.Errorf("%+v %s: %q %q %v", c.q, c.key, cond, order, args)
		}
	}
}

func TestListEnvelope(t *testing.T) {
	total := 3
	for _, c := range []struct {
		l    any
		want string
	}{
		{listq.List[int]{}, `{"data":[],"data_ref":"data","has_more":false,"more_starting_after":null,"object":"list"}`},
		{listq.List[int]{DataRef: "orders", Data: []int{1}, Total: &total, More: true, Next: "x"},
			`{"data_ref":"orders","has_more":true,"more_starting_after":"x","object":"list","orders":[1],"total":3}`},
		// A list answered whole: each row rendered, and its total.
		{listq.All([]string{"a", "b"}, strings.ToUpper),
			`{"data":["A","B"],"data_ref":"data","has_more":false,"more_starting_after":null,"object":"list","total":2}`},
		{listq.All([]string(nil), strings.ToUpper),
			`{"data":[],"data_ref":"data","has_more":false,"more_starting_after":null,"object":"list","total":0}`},
	} {
		b, err := json.Marshal(c.l)
		if err != nil || string(b) != c.want {
			t.Errorf("%s %v, want %s", b, err, c.want)
		}
	}
}

// A list writes "<", ">" and "&" as they are, like the single objects the
// services write (their serializer does not escape HTML): the same
// customer's name read alone and in a list is the same text.
func TestAListDoesNotEscapeHTML(t *testing.T) {
	var buf strings.Builder
	enc := json.NewEncoder(&buf) // as the services' serializer (internal/httpx)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(listq.List[map[string]string]{Data: []map[string]string{{"name": "<Tom & Jerry>"}}}); err != nil {
		t.Fatal(err)
	}
	if b, want := buf.String(), `"name":"<Tom & Jerry>"`; !strings.Contains(b, want) {
		t.Fatalf("%s: want %s", b, want)
	}
}

func TestBetween(t *testing.T) {
	q, _ := url.ParseQuery("created_at%5Bafter%5D=2024-01-31&created_at%5Bbefore%5D=2024-02-01T12:00:00Z")
	after, before, err := listq.Between(q, "created_at")
	if err != nil || after == nil || before == nil || after.Format(time.RFC3339) != "2024-01-31T00:00:00Z" ||
		before.Format(time.RFC3339) != "2024-02-01T12:00:00Z" {
		t.Fatalf("%v %v %v", after, before, err)
	}
	if after, before, err := listq.Between(q, "updated_at"); after != nil || before != nil || err != nil {
		t.Fatalf("absent: %v %v %v", after, before, err)
	}
	q, _ = url.ParseQuery("updated_at%5Bbefore%5D=yesterday")
	var e *apierr.Error
	if _, _, err := listq.Between(q, "updated_at"); !errors.As(err, &e) || !strings.HasPrefix(e.Details, "updated_at[before]:") {
		t.Fatalf("bad date: %v", err)
	}
}
