package erasure_test

import (
	"encoding/json"
	"testing"

	"github.com/tallyhq/tally/regional/erasure"
)

// A job's list of failed items: an item that named the subject, or one
// the erasure marked in the job's input (by its place in failed_items,
// or its own index), says only that she was erased; the others keep their
// reasons, and the document's bookkeeping key is left alone though a
// value of hex digits matches inside it.
func TestRedactJobMakesHerFailedItemsSayOnlyThatSheWasErased(t *testing.T) {
	s := erasure.Subject{CustomerID: "cust_1", Values: []string{"ann-42", "0f3a9c"}}
	marked := func(i int64) bool { return i == 7 }
	for _, c := range []struct {
		name, in, want string
		marked         func(int64) bool
		concerns       erasure.Listed
	}{
		{"a result naming her", `{"done_count":1,"failed":[{"row":1,"source_id":"ann-42","reason":"tier: (actual value is 'opal')"},
			{"row":2,"source_id":"bob-7","reason":"tier: (actual value is 'onyx')"}]}`,
			`{"done_count":1,"failed":[{"row":1,"source_id":null,"reason":"` + erasure.ErasedItem + `"},
			{"row":2,"source_id":"bob-7","reason":"tier: (actual value is 'onyx')"}]}`, nil, nil},
		{"a bulk update's errors", `{"errors":[{"key":"invalid_payload","message":"Invalid payload","details":"tier: 'opal'","source_id":"ann-42"}]}`,
			`{"errors":[{"key":"invalid_payload","message":"Invalid payload","details":"` + erasure.ErasedItem + `","source_id":null}]}`, nil, nil},
		{"a checkpoint's marked item", `{"next":9,"failed":[{"row":8,"reason":"tier: 'opal'"},{"row":9,"reason":"tier: 'onyx'"}],"failed_items":[7,8],
			"_erased_from":["aa0f3a9cbb"]}`,
			`{"next":9,"failed":[{"row":8,"reason":"` + erasure.ErasedItem + `"},{"row":9,"reason":"tier: 'onyx'"}],"failed_items":[7,8],
			"_erased_from":["aa0f3a9cbb"]}`, marked, nil},
		{"a bulk of events' marked refusal", `{"next":9,"errors":[{"index":7,"code":400,"message":"got 'opal'"},{"index":8,"code":400,"message":"got 'onyx'"}]}`,
			`{"next":9,"errors":[{"index":7,"code":400,"message":"` + erasure.ErasedItem + `"},{"index":8,"code":400,"message":"got 'onyx'"}]}`, marked, nil},
		{"only the mark matches", `{"next":9,"failed":[],"_erased_from":["aa0f3a9cbb"]}`, `{"next":9,"failed":[],"_erased_from":["aa0f3a9cbb"]}`, nil, nil},
		{"a finished job's failure that concerns her", `{"failed":[{"row":1,"source_id":"ord-1","reason":"tier: 'opal'"},
			{"row":2,"source_id":"ord-2","reason":"tier: 'onyx'"}],"other":[{"reason":"kept"}]}`,
			`{"failed":[{"row":1,"source_id":"ord-1","reason":"` + erasure.ErasedItem + `"},
			{"row":2,"source_id":"ord-2","reason":"tier: 'onyx'"}],"other":[{"reason":"kept"}]}`, nil, erasure.Listed{"failed": {0: true}}},
	} {
		out, changed, err := s.RedactJob([]byte(c.in), "_erased_from", c.marked, c.concerns)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got, want any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %s: %v", c.name, out, err)
		}
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) || changed != (c.in != c.want) {
			t.Errorf("%s: %s (changed %v), want %s", c.name, g, changed, w)
		}
	}
}
