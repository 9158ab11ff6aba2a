package erasure

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// The stored inputs of jobs not yet finished (a JSON document or a CSV
// file), redacted item by item; async.EraseInputs writes them back.

// RedactInput is in without s's data, and the items that named s.
func (s Subject) RedactInput(in []byte) ([]byte, []int64, error) {
	t := bytes.TrimSpace(in)
	if len(t) > 0 && (t[0] == '[' || t[0] == '{') && json.Valid(t) {
		return s.redactJSON(t)
	}
	out, items := s.redactCSV(in)
	return out, items, nil
}

// redactJSON redacts the elements of doc's array (or of each array of an
// object) one by one, so that the items that named s are known; any other
// value is redacted whole.
func (s Subject) redactJSON(doc []byte) ([]byte, []int64, error) {
	var items []int64
	elems := func(raw json.RawMessage) (json.RawMessage, error) {
		var es []json.RawMessage
		if err := json.Unmarshal(raw, &es); err != nil {
			return nil, err
		}
		for i, e := range es {
			out, did, err := s.Redact(e)
			if err != nil {
				return nil, err
			}
			if did {
				es[i], items = out, append(items, int64(i))
			}
		}
		return json.Marshal(es)
	}
	if doc[0] == '[' {
		out, err := elems(doc)
		return out, items, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(doc, &obj); err != nil {
		return nil, nil, err
	}
	for k, v := range obj {
		var err error
		if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '[' {
			obj[k], err = elems(t)
		} else {
			obj[k], _, err = s.Redact(v)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	out, err := json.Marshal(obj)
	return out, items, err
}

// redactCSV blanks, in a copy of in, each field of a data row that names
// s (Skips.Fields), and answers the rows that held one (0 for the first
// after the header). Rows are told apart as the jobs read them
// (encoding/csv, any width), the header is left.
func (s Subject) redactCSV(in []byte) ([]byte, []int64) {
	out := bytes.Clone(in)
	r := csv.NewReader(bytes.NewReader(in))
	r.FieldsPerRecord = -1
	var items []int64
	for row := int64(-1); ; row++ {
		start := r.InputOffset()
		_, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, items
		}
		var pe *csv.ParseError
		if err != nil && !errors.As(err, &pe) {
			return out, items
		}
		if row < 0 {
			continue // the header
		}
		named := false
		for _, sp := range fieldSpans(in[start:r.InputOffset()]) {
			f := in[start+int64(sp[0]) : start+int64(sp[1])]
			if s.Names(unquote(f)) {
				blank(out[start+int64(sp[0]) : start+int64(sp[1])])
				named = true
			}
		}
		if named {
			items = append(items, row)
		}
	}
}

// Names says whether a field's value is or holds one of s's values, or is
// s's id.
func (s Subject) Names(v string) bool {
	if strings.TrimSpace(v) == s.CustomerID {
		return true
	}
	_, did := s.RedactText(v)
	return did
}

// fieldSpans are the byte ranges of a raw CSV row's fields, quotes
// included, its line break not.
func fieldSpans(row []byte) [][2]int {
	var spans [][2]int
	start, inQuotes := 0, false
	for i := 0; i < len(row); i++ {
		c := row[i]
		switch {
		case inQuotes:
			if c == '"' {
				if i+1 < len(row) && row[i+1] == '"' {
					i++
				} else {
					inQuotes = false
				}
			}
		case c == '"' && i == start:
			inQuotes = true
		case c == ',':
			spans, start = append(spans, [2]int{start, i}), i+1
		case c == '\n' || c == '\r':
			return append(spans, [2]int{start, i})
		}
	}
	return append(spans, [2]int{start, len(row)})
}

// unquote is a raw field's value.
func unquote(f []byte) string {
	if len(f) >= 2 && f[0] == '"' && f[len(f)-1] == '"' {
		return strings.ReplaceAll(string(f[1:len(f)-1]), `""`, `"`)
	}
	return string(f)
}

// blank overwrites a raw field with spaces, keeping the quotes around a
// quoted one and the line breaks in it (and a stray quote, which keeps a
// row that did not read as CSV so): the row keeps its length and lines,
// and the field reads as empty (the jobs trim their cells).
func blank(f []byte) {
	quoted := len(f) >= 2 && f[0] == '"' && f[len(f)-1] == '"'
	for i, c := range f {
		switch {
		case c == '\n' || c == '\r':
		case quoted && (i == 0 || i == len(f)-1):
		case !quoted && c == '"':
		default:
			f[i] = ' '
		}
	}
}
