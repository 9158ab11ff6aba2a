package filters

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
)

// FromJSON reads filters given in a request body, as exports take them:
//
//	{"junction": "AND", "created_at": {"conditions": {"$after": ["2024-10-01T00:00:00Z"]}},
//	 "voucher_id": {"conditions": {"$in": ["v_1", "v_2"]}}}
//
// Values come as arrays or as scalars, `conditions` may be left out, and
// junction is and/or in either case. They mean what the same filters mean
// in a query; a problem is a 400 with the key the caller names (for
// example invalid_export_params), its details naming the filter as param
// says (parameters.filters.created_at.conditions.$after).
func FromJSON(raw json.RawMessage, fields map[string]Field, param, key string) (Filter, error) {
	bad := func(where, problem string) error {
		return &apierr.Error{Status: 400, Key: key, Message: "Invalid export params", Details: where + ": " + problem}
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return Filter{}, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return Filter{}, bad(param, "must be an object of filters by field")
	}
	q := url.Values{}
	names := make([]string, 0, len(top))
	for k := range top {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, field := range names {
		v := top[field]
		where := param + "." + field
		if field == "junction" {
			var j string
			if err := json.Unmarshal(v, &j); err != nil {
				return Filter{}, bad(where, "must be and or or")
			}
			q.Set("filters[junction]", j)
			continue
		}
		var conds map[string]json.RawMessage
		if err := json.Unmarshal(v, &conds); err != nil {
			return Filter{}, bad(where, "must be an object such as {\"conditions\": {\"$in\": [\"…\"]}}")
		}
		if c, ok := conds["conditions"]; ok && len(conds) == 1 {
			conds = nil
			if err := json.Unmarshal(c, &conds); err != nil {
				return Filter{}, bad(where+".conditions", "must be an object of conditions")
			}
			where += ".conditions"
		}
		if len(conds) == 0 {
			return Filter{}, bad(where, "names no condition")
		}
		for op, val := range conds {
			vals, err := values(val)
			if err != nil {
				return Filter{}, bad(where+"."+op, err.Error())
			}
			k := "filters[" + field + "][conditions][" + op + "]"
			for _, s := range vals {
				q.Add(k, s)
			}
			if len(vals) == 0 {
				q[k] = []string{}
			}
		}
	}
	f, err := Parse(q, fields)
	var e *apierr.Error
	if errors.As(err, &e) {
		// filters[a][conditions][$op]: problem → param.a.conditions.$op: problem
		where, problem, _ := strings.Cut(e.Details, ": ")
		where = strings.NewReplacer("filters[", param+".", "][", ".", "]", "").Replace(where)
		if where == "filters" {
			where = param
		}
		return Filter{}, bad(where, problem)
	}
	return f, err
}

// values reads a condition's value: an array of scalars or one scalar.
func values(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	var list []json.RawMessage
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, errors.New("must be a value or an array of values")
		}
	} else {
		list = []json.RawMessage{raw}
	}
	out := make([]string, 0, len(list))
	for _, v := range list {
		var x any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			return nil, errors.New("must be a value or an array of values")
		}
		switch x := x.(type) {
		case string:
			out = append(out, x)
		case json.Number:
			out = append(out, x.String())
		case bool:
			out = append(out, strconv.FormatBool(x))
		case nil:
			// $has_value and $is_unknown take none
		default:
			return nil, errors.New("values must be strings, numbers or booleans")
		}
	}
	return out, nil
}
