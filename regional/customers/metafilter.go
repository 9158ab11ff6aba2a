package customers

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/filters"
)

// metaConds are the metadata conditions the customers list serves: those
// a containment (@>) on the metadata answers, which the inverted index of
// migration 51 (customers_by_metadata) serves on both databases. Others
// ($contains, $is_not, …) would read every customer of the project for
// one page; they are refused by name.
var metaConds = map[string]bool{"$is": true, "$in": true}

// parseMetadataFilter reads `filters[metadata.<key>][conditions][$is|$in]`
// (the interface's filters syntax, as the exports take it; the reference's
// GET /v1/customers names no filter of metadata, so this is Tally's) into
// the SQL the list adds. Any other `filters` field is a 400 naming it.
func parseMetadataFilter(q url.Values) (MetadataFilter, error) {
	fields := map[string]filters.Field{}
	for k := range q {
		rest, ok := strings.CutPrefix(k, "filters[")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, "]")
		if key, ok := strings.CutPrefix(name, "metadata."); ok && key != "" && len(key) <= 100 {
			fields[name] = filters.Field{Kind: filters.String, Column: name}
		}
	}
	f, err := filters.Parse(q, fields)
	if err != nil || f.Empty() {
		return MetadataFilter{}, err
	}
	var mf MetadataFilter
	mf.Or = f.Or
	for _, c := range f.Conds {
		if !metaConds[c.Op] {
			return MetadataFilter{}, apierr.InvalidQuery("filters["+c.Field+"]",
				fmt.Sprintf("the customers list filters metadata by $is and $in only, got %s", c.Op))
		}
		key := strings.TrimPrefix(c.Field, "metadata.")
		var docs []string
		for _, v := range c.Values {
			docs = append(docs, metadataDocs(key, v)...)
		}
		mf.conds = append(mf.conds, docs)
	}
	return mf, nil
}

// metadataDocs are the metadata objects whose containment means key is v:
// v as a string and, when v reads as a JSON number or boolean, as that
// value too (the filter's value is text, as in the exports' metadata
// filters, where "5" matches 5).
func metadataDocs(key, v string) []string {
	doc := func(val any) string {
		b, _ := json.Marshal(map[string]any{key: val})
		return string(b)
	}
	out := []string{doc(v)}
	if v == "true" || v == "false" {
		out = append(out, doc(v == "true"))
	} else if _, err := strconv.ParseFloat(v, 64); err == nil && json.Valid([]byte(v)) {
		out = append(out, doc(json.RawMessage(v)))
	}
	return out
}

// MetadataFilter is a parsed metadata filter of the customers list: each
// condition holds when the metadata contains one of its documents.
type MetadataFilter struct {
	Or    bool
	conds [][]string
}

// Empty says whether the filter has no condition.
func (f MetadataFilter) Empty() bool { return len(f.conds) == 0 }

// sql is the filter's condition. Its documents are written into it as
// literals, not given as arguments: a prepared statement's generic plan
// (PostgreSQL's after five runs) knows nothing of an argument's value and,
// guessing that a pair is common, reads the project's customers from the
// newest, filtering, where the literal's plan reads the index.
func (f MetadataFilter) sql() string {
	if len(f.conds) == 0 {
		return ""
	}
	var cs []string
	for _, docs := range f.conds {
		var ors []string
		for _, d := range docs {
			// attrs->'metadata' as the index's expression spells it, so
			// that both planners match the condition to the index.
			ors = append(ors, "(attrs->'metadata') @> "+literal(d)+"::JSONB")
		}
		cs = append(cs, "("+strings.Join(ors, " OR ")+")")
	}
	junction := " AND "
	if f.Or {
		junction = " OR "
	}
	return "(" + strings.Join(cs, junction) + ")"
}

// literal is s as an escape string literal (E'…', the same in PostgreSQL
// and CockroachDB whatever standard_conforming_strings says): its quotes
// and backslashes doubled.
func literal(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}
