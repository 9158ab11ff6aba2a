package stacked_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/engine/stacked"
)

// counted writes its JSON as encoding/json writes the same string, and
// counts how often it is asked to.
type counted struct{ n *int }

func (c counted) AppendJSON(b []byte) ([]byte, error) { *c.n++; return append(b, `"<b>&</b>"`...), nil }
func (c counted) MarshalJSON() ([]byte, error)        { *c.n++; return []byte(`"<b>&</b>"`), nil }

// A stacked redemption's view is encoded once, when it is stored: its
// answer (jsonx) and its webhook notice (encoding/json) reuse those bytes,
// and both read as before, the notice's HTML escaped as encoding/json
// escapes it.
func TestAStoredViewIsEncodedOnceForItsAnswerAndNotice(t *testing.T) {
	n := 0
	view := map[string]any{"id": "r_1", "object": "redemption", "amount": int64(500), "note": counted{&n},
		"voucher": map[string]any{"code": "A<1>", "metadata": map[string]any{}}}
	rs := []stacked.Redemption{{ID: "r_1", ObjectType: "voucher", View: view}}
	if err := stacked.QueueInsert(&pgx.Batch{}, "proj_1", rs); err != nil || n != 1 {
		t.Fatalf("stored: %v, %d encodings", err, n)
	}
	answer, err := jsonx.Append(nil, map[string]any{"redemptions": []any{rs[0].Answer()}})
	if err != nil {
		t.Fatal(err)
	}
	notice, err := json.Marshal(map[string]any{"redemption": rs[0].Answer()})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("the view was encoded %d times", n)
	}
	// As the view's map itself is written: jsonx without HTML escapes,
	// encoding/json with them.
	n = 0
	wantAnswer, _ := jsonx.Append(nil, map[string]any{"redemptions": []any{view}})
	wantNotice, _ := json.Marshal(map[string]any{"redemption": view})
	if !bytes.Equal(answer, wantAnswer) || !bytes.Equal(notice, wantNotice) {
		t.Fatalf("answer %s\nwant   %s\nnotice %s\nwant   %s", answer, wantAnswer, notice, wantNotice)
	}
}
