package listq_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/listq"
)

func TestParse(t *testing.T) {
	spec := listq.Spec{Orders: []string{"-created_at", "created_at", "updated_at"}, Pages: true}
	for _, c := range []struct {
		query string
		want  listq.Query
		fails string
	}{
		{"", listq.Query{Limit: 10, Order: "-created_at", Key: "created_at", Desc: true}, ""},
		{"limit=5&order=updated_at&starting_after_id=x&page=1", listq.Query{Limit: 5, Order: "updated_at", Key: "updated_at", After: "x"}, ""},
		{"limit=0", listq.Query{}, "limit"},
		{"limit=101", listq.Query{}, "limit"},
		{"order=id", listq.Query{}, "order"},
		{"page=2", listq.Query{}, "page"},
	} {
		q, _ := url.ParseQuery(c.query)
		got, err := listq.Parse(q, spec)
		if c.fails != "" {
			if err == nil {
				t.Errorf("%q: no error, want one about %s", c.query, c.fails)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v %v, want %+v", c.query, got, err, c.want)
		}
	}
	q, _ := url.ParseQuery("order=bogus&page=7")
	if got, err := listq.Parse(q, listq.Spec{NoOrder: true, DefaultOrder: "-id"}); err != nil || !got.Desc || got.Key != "id" {
		t.Errorf("NoOrder: %+v %v", got, err)
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
