// Package erasure is what a customer's permanent deletion (POST
// /v1/customers/{id}/permanent-deletion) asks of every package that holds
// personal data: the Subject being erased, an Eraser each owner gives the
// customers service's constructor, and the redaction of JSON documents
// (stored answers, webhook payloads, async results) that copied the
// customer. It names no table: each owner erases its own.
package erasure

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Subject is a customer being erased: their id, which stays as a tombstone
// (ledger entries, orders, cards and redemptions keep pointing to it), and
// the personal values they had (name, email, phone, source_id, address
// lines), which no stored document may keep.
type Subject struct {
	CustomerID string   `json:"customer_id"`
	Values     []string `json:"values"`
}

// Counts are the answer's data_json: how much was erased, by the
// reference's kinds.
type Counts struct {
	Events         int64 `json:"events"`
	CustomerEvents int64 `json:"customer_events"`
	DailyEvents    int64 `json:"daily_events"`
	Segments       int64 `json:"segments"`
	Orders         int64 `json:"orders"`
	OrderEvents    int64 `json:"order_events"`
	Customer       int64 `json:"customer"`
}

// Eraser erases what its package holds of s, in the permanent deletion's
// transaction, adding what it erased to n.
type Eraser func(ctx context.Context, tx pgx.Tx, projectID string, s Subject, n *Counts) error

// personal are the properties of a customer object that are the person's.
var personal = []string{"name", "email", "phone", "address", "birthdate", "birthday", "metadata", "description", "source_id"}

// minValue is the shortest value redacted wherever it appears: shorter
// ones ("PL", "12") would take other objects' values with them.
const minValue = 4

// Redact returns doc without s's personal data, and whether it held any:
// every object that is s (its id with object "customer", or no object)
// loses its personal properties, every string equal to one of s's values
// becomes null, a string holding one loses it, and a string that is a
// JSON document is redacted as one.
func (s Subject) Redact(doc []byte) ([]byte, bool, error) {
	if !s.Mentions(doc) {
		return doc, false, nil
	}
	v, err := decode(doc)
	if err != nil {
		return nil, false, err
	}
	v, changed := s.redact(v)
	if !changed {
		return doc, false, nil
	}
	out, err := json.Marshal(v)
	return out, true, err
}

// decode reads a JSON document, its numbers kept as written.
func decode(doc []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// RedactAll returns doc without the data of any of subjects.
func RedactAll(doc []byte, subjects []Subject) ([]byte, error) {
	for _, s := range subjects {
		out, _, err := s.Redact(doc)
		if err != nil {
			return nil, err
		}
		doc = out
	}
	return doc, nil
}

// Mentions says whether doc may hold s's data: its id or one of its values
// appears in it.
func (s Subject) Mentions(doc []byte) bool {
	for _, p := range s.Patterns() {
		if bytes.Contains(doc, []byte(p)) {
			return true
		}
	}
	return false
}

// Patterns are the strings whose presence marks a document as possibly
// holding s's data: the id and the values long enough to be told apart.
func (s Subject) Patterns() []string {
	out := []string{s.CustomerID}
	for _, v := range s.Values {
		if len(v) >= minValue {
			out = append(out, v)
		}
	}
	return out
}

// InFile says whether one of s's personal values (long enough to be told
// apart) appears in data: what an export's file is searched for.
func (s Subject) InFile(data []byte) bool {
	for _, v := range s.Values {
		if len(v) >= minValue && bytes.Contains(data, []byte(v)) {
			return true
		}
	}
	return false
}

func (s Subject) redact(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		changed := false
		if id, _ := x["id"].(string); id == s.CustomerID {
			if o, ok := x["object"]; !ok || o == "customer" {
				for _, k := range personal {
					if x[k] != nil {
						x[k], changed = nil, true
					}
				}
			}
		}
		for k, e := range x {
			var c bool
			if x[k], c = s.redact(e); c {
				changed = true
			}
		}
		return x, changed
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			if x[i], c = s.redact(e); c {
				changed = true
			}
		}
		return x, changed
	case string:
		return s.redactString(x)
	}
	return v, false
}

// redactString is the redaction of one string: null when it is one of the
// values; a JSON document kept as a string (a webhook delivery's exact
// body) redacted as a document; any other string without the values in
// it.
func (s Subject) redactString(x string) (any, bool) {
	for _, p := range s.Values {
		if len(p) >= minValue && x == p {
			return nil, true
		}
	}
	if strings.HasPrefix(x, "{") || strings.HasPrefix(x, "[") {
		if out, did, err := s.Redact([]byte(x)); err == nil {
			return string(out), did
		}
	}
	changed := false
	for _, p := range s.Values {
		if len(p) >= minValue && strings.Contains(x, p) {
			x, changed = strings.ReplaceAll(x, p, ""), true
		}
	}
	return x, changed
}

// RedactText returns x without s's values, and whether it held any: empty
// when it is one of them, each taken out of it otherwise. It is the
// redaction of a field of a text file (a bulk job's CSV report), where a
// value cannot become null.
func (s Subject) RedactText(x string) (string, bool) {
	changed := false
	for _, p := range s.Values {
		if len(p) < minValue || !strings.Contains(x, p) {
			continue
		}
		if x == p {
			return "", true
		}
		x, changed = strings.ReplaceAll(x, p, ""), true
	}
	return x, changed
}

// Refs are the strings by which a job's item may have named s as a
// customer: the id, and the values (the source_id is one of them).
func (s Subject) Refs() []string {
	return append([]string{s.CustomerID}, s.Values...)
}
