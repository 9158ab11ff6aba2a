package events

import (
	"encoding/json"

	"github.com/tallyhq/tally/regional/earning"
	"github.com/tallyhq/tally/tenancy"
)

// written is the JSON an event is written as: the request's answer, the
// metadata column, and the activity's data, which is also the webhook
// notice's object. The event's metadata and its customer are marshaled
// once and their bytes reused in all three: each was marshaled three or
// four times (the answer, the column, the activity, the notice), a good
// part of an event's CPU when its metadata is large.
type written struct {
	answer   json.RawMessage
	metadata []byte
	data     json.RawMessage // the activity's data and the notice's object
	activity []byte
}

// accrualPayload is the accrual task's payload: the event as
// earning.CustomEvent, with the bytes of its metadata already made (the
// field shadows the embedded one's, which is last there too, so the
// payload is json.Marshal's of the event: TestAnAccrualsPayloadIsTheEvent).
type accrualPayload struct {
	earning.CustomEvent
	Metadata json.RawMessage `json:"metadata"`
}

// eventParts are what the event's JSON is made of.
type eventParts struct {
	view     View
	customer map[string]any // customers.Customer.Simple
	metadata map[string]any
	schema   tenancy.EventSchema
	// referral and loyalty are the activity's event's (the request's);
	// converted what the referral conversion answered.
	referral, loyalty, converted any
}

// write marshals the event's pieces once each and assembles the rest from
// their bytes, which come out as json.Marshal of the whole objects would
// (TestAnEventsJSONIsTheWholeObjectsMarshaled).
func (p eventParts) write() (written, error) {
	var w written
	cust, err := json.Marshal(p.customer)
	if err != nil {
		return w, err
	}
	if w.metadata, err = json.Marshal(p.metadata); err != nil {
		return w, err
	}
	v := p.view
	v.Customer, v.Metadata = cust, w.metadata
	if w.answer, err = json.Marshal(v); err != nil {
		return w, err
	}
	// The activity, in the reference's shape of customer.custom_event.
	evObj := map[string]any{"id": v.ID, "object": "event", "type": v.Type, "customer": json.RawMessage(cust),
		"referral": p.referral, "loyalty": p.loyalty, "metadata": json.RawMessage(w.metadata), "created_at": v.CreatedAt}
	data := map[string]any{"event": evObj, "event_schema": map[string]any{"id": p.schema.ID, "name": p.schema.Name},
		"customer": json.RawMessage(cust), "referral": p.converted, "loyalty": nil}
	if w.data, err = json.Marshal(data); err != nil {
		return w, err
	}
	// {"data": data, "event_source": {"channel": "API"}}, keys in
	// json.Marshal's order.
	w.activity = make([]byte, 0, len(w.data)+48)
	w.activity = append(w.activity, `{"data":`...)
	w.activity = append(w.activity, w.data...)
	w.activity = append(w.activity, `,"event_source":{"channel":"API"}}`...)
	return w, nil
}
