package async_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/erasure"
)

// The erasure of a customer redacts the stored inputs of jobs not yet run
// and marks the items that named her: a JSON input item by item (the
// elements of its array, or of an object's arrays), a CSV input field by
// field with the file's length, lines and rows kept, its other rows and
// its header untouched. Another project's inputs, and the inputs that do
// not name her, are left as they were.
func TestErasureRedactsAndMarksThePendingJobsInputs(t *testing.T) {
	p := open(t, database(t))
	ctx := context.Background()
	ann := erasure.Subject{CustomerID: "cust_ann", Values: []string{"ann-src", "Ann Smith", "ann@example.com"}}
	csvIn := "source_id,name,email,metadata.note\n" +
		"ann-src,Ann Smith,ann@example.com,gold\n" +
		"bob-src,\"Bob \"\"B\"\"\nBrown\",bob@example.com,\"ann@example.com, again\"\n" +
		"carl-src,Carl,\"carl@example.com\",\"two\nlines\"\n" +
		"dan,bad\"quote,Ann Smith\n" +
		"eve,cust_ann,,\n"
	bulk := `[{"source_id":"ann-src","name":"Ann Smith","metadata":{"tier":"gold"}},{"source_id":"bob-src","name":"Bob"},` +
		`{"customer":{"id":"cust_ann","source_id":"x-1","metadata":{"a":1}}}]`
	meta := `{"source_ids":["bob-src","ann-src","carl-src"],"metadata":{"tier":"gold"}}`
	untouched := `[{"source_id":"bob-src"}]`
	inputs := map[string]string{"csv": csvIn, "bulk": bulk, "meta": meta, "none": untouched}
	ids := map[string]string{}
	err := db.InTx(ctx, p, func(tx pgx.Tx) error {
		for k, in := range inputs {
			a, err := async.StartJobWithInput(ctx, tx, "proj_a", "TEST.JOB", nil, []byte(in))
			if err != nil {
				return err
			}
			ids[k] = a.ID
		}
		a, err := async.StartJobWithInput(ctx, tx, "proj_b", "TEST.JOB", nil, []byte(bulk))
		ids["other"] = a.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, p, func(tx pgx.Tx) error { return async.EraseInputs(ctx, tx, "proj_a", ann, &erasure.Counts{}) }); err != nil {
		t.Fatal(err)
	}
	input := func(project, k string) string {
		var s string
		if err := p.QueryRow(ctx, `SELECT string_agg(convert_from(data, 'UTF8'), '' ORDER BY part) FROM async_inputs
			WHERE project_id = $1 AND action_id = $2`, project, ids[k]).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	marked := func(k string) []int64 {
		rows, err := p.Query(ctx, `SELECT item FROM async_input_erasures WHERE project_id = 'proj_a' AND action_id = $1 ORDER BY item`, ids[k])
		if err != nil {
			t.Fatal(err)
		}
		items, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return items
	}

	got := input("proj_a", "csv")
	if len(got) != len(csvIn) || strings.Count(got, "\n") != strings.Count(csvIn, "\n") {
		t.Fatalf("the CSV changed its length or lines:\n%q\n%q", csvIn, got)
	}
	for _, v := range ann.Values {
		if strings.Contains(got, v) {
			t.Errorf("the CSV still holds %q:\n%s", v, got)
		}
	}
	r := csv.NewReader(strings.NewReader(got))
	r.FieldsPerRecord = -1
	var recs [][]string
	for {
		rec, err := r.Read()
		if err != nil && rec == nil {
			break
		}
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		recs = append(recs, rec)
	}
	want := [][]string{{"source_id", "name", "email", "metadata.note"}, {"", "", "", "gold"},
		{"bob-src", "Bob \"B\"\nBrown", "bob@example.com", ""}, {"carl-src", "Carl", "carl@example.com", "two\nlines"}}
	for i, w := range want {
		if i >= len(recs) || !slices.Equal(recs[i], w) {
			t.Errorf("CSV row %d: %q, want %q", i, recs[min(i, len(recs)-1)], w)
		}
	}
	if !strings.HasSuffix(got, "eve,        ,,\n") || !strings.Contains(got, "dan,bad\"quote,         \n") {
		t.Errorf("the rows naming her id, and one that is no CSV, should lose the fields that name her: %q", got)
	}
	if m := marked("csv"); !slices.Equal(m, []int64{0, 1, 3, 4}) {
		t.Errorf("the CSV's marked rows: %v", m)
	}

	var items []map[string]any
	if err := json.Unmarshal([]byte(input("proj_a", "bulk")), &items); err != nil || len(items) != 3 {
		t.Fatalf("the bulk input: %v %v", items, err)
	}
	if items[0]["source_id"] != nil || items[0]["name"] != nil || items[1]["source_id"] != "bob-src" ||
		items[2]["customer"].(map[string]any)["metadata"] != nil {
		t.Errorf("the bulk input redacted: %v", items)
	}
	if m := marked("bulk"); !slices.Equal(m, []int64{0, 2}) {
		t.Errorf("the bulk input's marked items: %v", m)
	}
	var body struct {
		SourceIDs []*string      `json:"source_ids"`
		Metadata  map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(input("proj_a", "meta")), &body); err != nil || len(body.SourceIDs) != 3 || body.SourceIDs[1] != nil ||
		*body.SourceIDs[2] != "carl-src" || body.Metadata["tier"] != "gold" {
		t.Errorf("the metadata input: %+v %v", body, err)
	}
	if m := marked("meta"); !slices.Equal(m, []int64{1}) {
		t.Errorf("the metadata input's marked items: %v", m)
	}
	if got := input("proj_a", "none"); got != untouched || len(marked("none")) != 0 {
		t.Errorf("an input without her: %s %v", got, marked("none"))
	}
	if got := input("proj_b", "other"); got != bulk {
		t.Errorf("another project's input: %s", got)
	}
}
