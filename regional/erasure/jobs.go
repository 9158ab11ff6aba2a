package erasure

import "encoding/json"

// ErasedItem is the reason a job gives for an item that names a customer
// permanently deleted: one it did not apply (the job's skips), and one it
// had refused before the erasure, whose own reason may have quoted her.
const ErasedItem = "The item names a customer who was permanently deleted: it was not applied."

// RedactJob is Redact for an async job's result or checkpoint, whose
// top-level arrays list the items that failed, each with why (reason,
// details, or a message alone). A why may quote what the item asked to
// write (a metadata value a schema refused, "actual value is 'X'"), which
// is none of s's values: so an element of such an array that named s, or
// that marked says is an item the erasure redacted in the job's input,
// says ErasedItem instead. An element's item is the number at its place in
// the array K+"_items" beside it (a chunked job's checkpoint), or its own
// "index" (a bulk of events). The document's property skip (the store's
// own bookkeeping, whose digests a value of hex digits could match) is
// left as it is. marked may be nil (a result: the job's input is gone).
// So does an element that concerns says is hers, by its array's key and
// its place in it: a failure the job recorded as naming her, though the
// element does not (a finished job's, whose input is gone).
func (s Subject) RedactJob(doc []byte, skip string, marked func(item int64) bool, concerns Listed) ([]byte, bool, error) {
	if marked == nil && len(concerns) == 0 && !s.Mentions(doc) {
		return doc, false, nil
	}
	v, err := decode(doc)
	if err != nil {
		return nil, false, err
	}
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == skip {
				continue
			}
			var c bool
			if arr, ok := e.([]any); ok {
				items, _ := x[k+"_items"].([]any)
				c = s.redactItems(arr, items, marked, concerns[k])
			} else {
				x[k], c = s.redact(e)
			}
			changed = changed || c
		}
	case []any:
		changed = s.redactItems(x, nil, marked, nil)
	default:
		v, changed = s.redact(v)
	}
	if !changed {
		return doc, false, nil
	}
	out, err := json.Marshal(v)
	return out, true, err
}

// Listed are the elements of a job's lists of failed items, by the list's
// key and the element's place in it (from 0).
type Listed map[string]map[int]bool

// Add lists the element at place k of list.
func (l Listed) Add(list string, k int) {
	if l[list] == nil {
		l[list] = map[int]bool{}
	}
	l[list][k] = true
}

// redactItems redacts the elements of a job's list of items in place, an
// element that named s, is a marked item or is listed in at saying only
// ErasedItem why.
func (s Subject) redactItems(arr, items []any, marked func(int64) bool, at map[int]bool) bool {
	changed := false
	for k, e := range arr {
		var did bool
		arr[k], did = s.redact(e)
		if obj, ok := arr[k].(map[string]any); ok && (did || at[k] || marked != nil && marked(itemOf(obj, items, k))) {
			did = erasedWhy(obj) || did
		}
		changed = changed || did
	}
	return changed
}

// itemOf is the item the k-th element obj of a job's list stands for, -1
// when unknown.
func itemOf(obj map[string]any, items []any, k int) int64 {
	n, ok := json.Number(""), false
	if k < len(items) {
		n, ok = items[k].(json.Number)
	} else {
		n, ok = obj["index"].(json.Number)
	}
	if i, err := n.Int64(); ok && err == nil {
		return i
	}
	return -1
}

// erasedWhy makes obj's reason and details (or its message, when it has
// neither) ErasedItem, and says whether that changed it.
func erasedWhy(obj map[string]any) bool {
	keys := []string{"reason", "details"}
	if _, r := obj["reason"]; !r {
		if _, d := obj["details"]; !d {
			keys = []string{"message"}
		}
	}
	changed := false
	for _, k := range keys {
		if w, ok := obj[k].(string); ok && w != ErasedItem {
			obj[k], changed = ErasedItem, true
		}
	}
	return changed
}
