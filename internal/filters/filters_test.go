package filters

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
)

var fields = map[string]Field{"created_at": {Kind: DateTime, Column: "created_at"}, "id": {Kind: String, Column: "id"}}

func parse(t *testing.T, raw string) (Filter, error) {
	t.Helper()
	q, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return Parse(q, fields)
}

func TestTheSpellingsClientsSendMeanTheSame(t *testing.T) {
	want := "(created_at > $1)"
	for _, raw := range []string{
		"filters[created_at][conditions][$after]=2024-01-01T00:00:00Z",
		"filters[created_at][conditions][$after][0]=2024-01-01T00:00:00Z",
		"filters%5Bcreated_at%5D%5Bconditions%5D%5B%24after%5D=2024-01-01T00%3A00%3A00Z",
		"filters%5Bcreated_at%5D%5Bconditions%5D%5B%24after%5D%5B0%5D=2024-01-01T00:00:00Z",
		"filters[created_at][$after]=2024-01-01T00:00:00Z",
	} {
		f, err := parse(t, raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		sql, args := f.SQL(fields, nil, time.Now())
		if sql != want || len(args) != 1 || !args[0].(time.Time).Equal(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("%s: %s %v", raw, sql, args)
		}
	}
	f, err := parse(t, "filters[id][conditions][$in][0]=a&filters[id][conditions][$in][1]=b&filters[junction]=OR&filters[id][conditions][$starts_with]=x_%25")
	if err != nil {
		t.Fatal(err)
	}
	sql, args := f.SQL(fields, []any{"p"}, time.Now())
	if sql != `(id = ANY($2::TEXT[]) OR id LIKE $3)` || strings.Join(args[1].([]string), ",") != "a,b" || args[2] != `x\_\%%` {
		t.Fatalf("%s %v", sql, args)
	}
}

func TestBadFiltersNameTheParameter(t *testing.T) {
	for raw, param := range map[string]string{
		"filters[amount][conditions][$is]=1":                "filters[amount][conditions][$is]",
		"filters[id][conditions][$after]=2024-01-01":        "filters[id][conditions][$after]",
		"filters[created_at][conditions][$after]=yesterday": "filters[created_at][conditions][$after]",
		"filters[created_at][conditions][$more_than]=-1":    "filters[created_at][conditions][$more_than]",
		"filters[junction]=xor":                             "filters[junction]",
		"filters[id]x=1":                                    "filters[id]x",
		"filters[id][conditions][$is][zero]=a":              "filters[id][conditions][$is][zero]",
		"filters[id][conditions][$is]=a&filters[id][$is]=b": "filters[id]",
		"filters=1": "filters",
	} {
		_, err := parse(t, raw)
		var ae *apierr.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Key != "invalid_query_params" || !strings.Contains(ae.Details, param) {
			t.Errorf("%s: %v, want a 400 naming %s", raw, err, param)
		}
	}
}

// FuzzParse: whatever the query, Parse answers a filter or a 400, and a
// parsed filter renders SQL with one argument per placeholder.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"filters[created_at][conditions][$after]=2024-01-01T00:00:00Z",
		"filters[id][conditions][$in][0]=a&filters[id][conditions][$in][]=b&filters[junction]=or",
		"filters%5Bid%5D%5B%24is%5D=x", "filters[id][[[", "filters]]", "filters[created_at][conditions][$less_than]=3",
		"filters[id][conditions][$not_contain]=%00", "filters[id][conditions][$is][99999999999999999999]=a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // the HTTP layer answers a 400 before us
		}
		flt, err := Parse(q, fields)
		if err != nil {
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("%q: %v is not a 400", raw, err)
			}
			return
		}
		sql, args := flt.SQL(fields, nil, time.Now())
		if n := strings.Count(sql, "$"); n != len(args) {
			t.Fatalf("%q: %d placeholders, %d args: %s", raw, n, len(args), sql)
		}
	})
}
