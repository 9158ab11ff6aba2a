package events

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/tallyhq/tally/internal/jsonx"
	"github.com/tallyhq/tally/regional/earning"
	"github.com/tallyhq/tally/tenancy"
)

// counted is a metadata value that counts how often it is marshaled.
type counted struct{ n *int }

func (c counted) MarshalJSON() ([]byte, error) {
	*c.n++
	return []byte(`"<&>"`), nil
}

// An event's answer, activity and notice object are the bytes json.Marshal
// made of the whole objects when each was built apart, and its metadata
// and customer are marshaled once for all of them (they were marshaled in
// each: four times the metadata, three the customer).
func TestAnEventsJSONIsTheWholeObjectsMarshaled(t *testing.T) {
	metaN, custN := 0, 0
	meta := map[string]any{"amount": json.Number("12.50"), "note": "a < b & c", "big": counted{&metaN},
		"nested": map[string]any{"z": []any{1.5, true, nil}, "a": "é"}}
	simple := map[string]any{"id": "cust_1", "name": nil, "email": "a@b.c", "source_id": "s1",
		"metadata": map[string]any{"tier": counted{&custN}}, "object": "customer"}
	created := jsonx.Time{Time: time.Date(2026, 11, 28, 20, 0, 0, 123e6, time.UTC)}
	sc := tenancy.EventSchema{ID: "ms_1", Name: "signup"}
	code := "CARD-1"
	referral := map[string]any{"code": &code, "referrer_id": (*string)(nil)}
	loyalty := map[string]any{"code": code}
	converted := map[string]any{"referrer": map[string]any{"id": "cust_2"}}

	got, err := eventParts{view: View{ID: "evcus_1", Object: "event", Type: "signup", CreatedAt: created}, customer: simple,
		metadata: meta, schema: sc, referral: referral, loyalty: loyalty, converted: converted}.write()
	if err != nil {
		t.Fatal(err)
	}
	if metaN != 1 || custN != 1 {
		t.Errorf("the metadata was marshaled %d times and the customer %d, want once each", metaN, custN)
	}

	// As the objects were marshaled before.
	type oldView struct {
		ID        string         `json:"id"`
		Object    string         `json:"object"`
		Type      string         `json:"type"`
		Customer  map[string]any `json:"customer"`
		Referral  any            `json:"referral"`
		Loyalty   any            `json:"loyalty"`
		Metadata  map[string]any `json:"metadata"`
		CreatedAt jsonx.Time     `json:"created_at"`
	}
	answer := must(t, oldView{ID: "evcus_1", Object: "event", Type: "signup", Customer: simple, Metadata: meta, CreatedAt: created})
	evObj := map[string]any{"id": "evcus_1", "object": "event", "type": "signup", "customer": simple, "referral": referral,
		"loyalty": loyalty, "metadata": meta, "created_at": created}
	data := map[string]any{"event": evObj, "event_schema": map[string]any{"id": sc.ID, "name": sc.Name},
		"customer": simple, "referral": converted, "loyalty": nil}
	activity := must(t, map[string]any{"data": data, "event_source": map[string]any{"channel": "API"}})
	notice := must(t, map[string]any{"object": data})
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"answer", got.answer, answer},
		{"metadata", got.metadata, must(t, meta)},
		{"activity", got.activity, activity},
		{"notice", must(t, map[string]any{"object": got.data}), notice},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, c.got, c.want)
		}
	}
}

func must(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The accrual task's payload, made with the metadata's bytes, is the
// bytes json.Marshal makes of the event (which the task decodes).
func TestAnAccrualsPayloadIsTheEvent(t *testing.T) {
	n := 0
	code := "CARD-1"
	ev := earning.CustomEvent{ID: "evcus_1", Type: "signup", CustomerID: "cust_1", LoyaltyCode: &code, CardID: "card_1",
		HolderID: "cust_2", CreatedAt: time.Date(2026, 11, 28, 20, 0, 0, 5, time.UTC), SchemaID: "ms_1", SchemaName: "signup",
		Metadata: map[string]any{"a": json.Number("1.50"), "b": "<x>", "c": counted{&n}}}
	meta := must(t, ev.Metadata)
	got, want := must(t, accrualPayload{ev, meta}), must(t, ev)
	if !bytes.Equal(got, want) {
		t.Errorf("payload:\n got %s\nwant %s", got, want)
	}
	if n != 2 {
		t.Errorf("the metadata was marshaled %d times, want 2 (its bytes, and the event as it was)", n)
	}
}
