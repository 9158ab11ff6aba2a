package erasure_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tallyhq/tally/regional/erasure"
)

func TestRedactTakesTheSubjectsPersonalDataAndNothingElse(t *testing.T) {
	s := erasure.Subject{CustomerID: "cust_1", Values: []string{"Ann Smith", "ann@example.com", "PL", "ann-42"}}
	for _, c := range []struct {
		name, in, want string
		changed        bool
	}{
		{"a copy of the customer", `{"customer":{"id":"cust_1","object":"customer","name":"Ann Smith","email":"ann@example.com","metadata":{"tier":"gold"},"address":{"country":"PL"}},"amount":100}`,
			`{"amount":100,"customer":{"address":null,"email":null,"id":"cust_1","metadata":null,"name":null,"object":"customer"}}`, true},
		{"a copy without object", `[{"id":"cust_1","source_id":"ann-42","phone":"+48 1"}]`, `[{"id":"cust_1","phone":null,"source_id":null}]`, true},
		{"a value elsewhere", `{"tracking_id":"ann-42","country":"PL","n":1.50}`, `{"country":"PL","n":1.50,"tracking_id":null}`, true},
		{"another customer", `{"customer":{"id":"cust_2","object":"customer","name":"Bob"}}`, `{"customer":{"id":"cust_2","object":"customer","name":"Bob"}}`, false},
		{"another object with the id", `{"id":"cust_1","object":"voucher","metadata":{"a":1}}`, `{"id":"cust_1","object":"voucher","metadata":{"a":1}}`, false},
		{"a document in a string", `{"body":"{\"customer\":{\"id\":\"cust_1\",\"name\":\"Ann Smith\"}}"}`,
			`{"body":"{\"customer\":{\"id\":\"cust_1\",\"name\":null}}"}`, true},
		{"a value in a sentence", `{"reason":"row 3: ann@example.com is taken"}`, `{"reason":"row 3:  is taken"}`, true},
		{"nothing of theirs", `{"voucher":"CODE"}`, `{"voucher":"CODE"}`, false},
	} {
		out, changed, err := s.Redact([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got, want any
		_ = json.Unmarshal(out, &got)
		_ = json.Unmarshal([]byte(c.want), &want)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) || changed != c.changed {
			t.Errorf("%s: %s (changed %v), want %s (%v)", c.name, out, changed, c.want, c.changed)
		}
		if c.changed && (strings.Contains(string(out), "Ann Smith") || strings.Contains(string(out), "ann@")) {
			t.Errorf("%s: still personal: %s", c.name, out)
		}
	}
	if !s.InFile([]byte("id,name\ncust_1,Ann Smith\n")) || s.InFile([]byte("id,country\ncust_1,PL\n")) {
		t.Error("InFile: a file is searched for the values long enough to be told apart, not the id")
	}
}

func TestRedactTextBlanksAFieldThatIsAValueAndTakesValuesOutOfOthers(t *testing.T) {
	s := erasure.Subject{CustomerID: "cust_1", Values: []string{"ann-42", "ann@example.com", "PL"}}
	for in, want := range map[string]string{"ann-42": "", "row 3: ann@example.com is taken": "row 3:  is taken",
		"PL": "PL", "cust_1": "cust_1", "bob-7": "bob-7"} {
		got, changed := s.RedactText(in)
		if got != want || changed != (in != want) {
			t.Errorf("RedactText(%q) = %q, %v; want %q", in, got, changed, want)
		}
	}
}
