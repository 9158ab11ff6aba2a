package jsonx

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func std(t *testing.T, v any) ([]byte, error) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

type view struct {
	ID     *string         `json:"id,omitempty"`
	Amount int64           `json:"amount"`
	Items  []item          `json:"items"`
	Meta   map[string]any  `json:"metadata,omitempty"`
	Raw    json.RawMessage `json:"raw,omitempty"`
	At     Time            `json:"at"`
}

type item struct {
	Name  string  `json:"name"`
	Price float64 `json:"price"`
}

// Append writes what encoding/json writes (HTML unescaped), byte for
// byte, for the values answers hold and the odd ones: strings that need
// escaping, floats either side of the exponent form, nil maps and slices,
// structs, Marshalers, raw messages; and fails where it fails.
func TestAppendIsEncodingJSON(t *testing.T) {
	id := "x"
	rows := []any{
		nil, true, false, 0, -7, int64(1 << 60), int32(-3), 0.0, math.Copysign(0, -1), 1.5, 100.0, 1e20, 1e21, 123456789012345678.0,
		1e-6, 9.99e-7, -2.5e-9, 0.1, 1.0 / 3,
		"", "plain", "a \"quote\"", `back\slash`, "tab\there", "nl\n", "\x00\x1f", "<b>&amp;</b>", "é", "日本", "\u2028\u2029",
		"bad \xff utf8", "emoji 😀",
		map[string]any{}, map[string]any(nil), []any{}, []any(nil), []string{"a"}, []string(nil), map[string]string{"b": "1", "a": "2"},
		map[string]any{"b": 1, "a": []any{1.5, "x", nil, map[string]any{"z": true, "é": "<>"}}, "": "empty", "A": 2, "a\"": 3},
		view{ID: &id, Amount: 5, Items: []item{{"a", 1.25}}, Meta: map[string]any{"k": "v"}, Raw: json.RawMessage(`{ "b" : 1 }`),
			At: Time{time.Date(2026, 11, 27, 23, 0, 0, 123e6, time.UTC)}},
		map[string]any{"view": &view{}, "views": []view{{}}, "time": time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), "raw": json.RawMessage(`[1, 2]`)},
		map[string]any{"number": json.Number("12.50"), "uint": uint(3), "float32": float32(0.1)},
		Time{time.Date(2026, 11, 28, 1, 2, 3, 456789e3, time.FixedZone("CET", 3600))}, &Time{time.Unix(0, 0)}, (*Time)(nil), Time{},
		map[string]any{"at": Time{time.Date(1999, 12, 31, 23, 59, 59, 999e6, time.UTC)}, "none": (*Time)(nil), "p": Ptr(&time.Time{})},
	}
	big := map[string]any{} // more keys than sort on the stack
	for i := 0; i < 40; i++ {
		big[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = i
	}
	rows = append(rows, big)
	for i, v := range rows {
		want, wantErr := std(t, v)
		got, err := Append(nil, v)
		if (err != nil) != (wantErr != nil) || err == nil && !bytes.Equal(got, want) {
			t.Errorf("%d: %#v: Append %s (%v), encoding/json %s (%v)", i, v, got, err, want, wantErr)
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), map[string]any{"x": math.Inf(-1)}, []any{func() {}}} {
		if _, err := Append(nil, bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// A timestamp, alone or in a page's maps, is written without
// encoding/json (whose Marshaler path allocated an encoder and a buffer
// for each of a qualification page's fifty), and a small map's keys are
// sorted without allocating.
func TestAppendWritesTimesWithoutAllocating(t *testing.T) {
	v := map[string]any{"created_at": Time{time.Now()}, "updated_at": Ptr(&time.Time{}), "none": (*Time)(nil)}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { _, _ = Append(buf[:0], v) }); n > 0 {
		t.Fatalf("%v allocations, want none", n)
	}
}

// randomTree is a random answer-like value.
func randomTree(r *rand.Rand, depth int) any {
	strs := []string{"id", "object", "amount", "a b", "ü", "<&>", "\"", "line\nbreak", "promo_01", ""}
	switch k := r.Intn(9); {
	case depth > 3 || k < 2:
		return strs[r.Intn(len(strs))]
	case k == 2:
		return r.NormFloat64() * math.Pow(10, float64(r.Intn(50)-25))
	case k == 3:
		return r.Intn(1 << 20)
	case k == 4:
		return r.Intn(2) == 0
	case k == 5:
		l := make([]any, r.Intn(4))
		for i := range l {
			l[i] = randomTree(r, depth+1)
		}
		return l
	default:
		m := map[string]any{}
		for i := r.Intn(6); i > 0; i-- {
			m[strs[r.Intn(len(strs))]+strs[r.Intn(len(strs))]] = randomTree(r, depth+1)
		}
		return m
	}
}

// Over random trees of maps, lists, strings and numbers, Append and
// encoding/json agree byte for byte.
func TestAppendAgreesOnRandomTrees(t *testing.T) {
	r := rand.New(rand.NewSource(39))
	for i := 0; i < 5000; i++ {
		v := randomTree(r, 0)
		want, wantErr := std(t, v)
		got, err := Append(nil, v)
		if wantErr != nil || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%#v: Append %s (%v), encoding/json %s (%v)", v, got, err, want, wantErr)
		}
	}
}

func BenchmarkAppendAnswer(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	data := make([]any, 50)
	for i := range data {
		data[i] = map[string]any{"id": "promo_01a21f", "object": "promotion_tier", "created_at": Time{time.Now()},
			"result":        map[string]any{"discount": map[string]any{"type": "AMOUNT", "amount_off": 100 + i, "effect": "APPLY_TO_ORDER"}},
			"applicable_to": map[string]any{"data": []any{}, "total": 0, "data_ref": "data", "object": "list"},
			"metadata":      map[string]any{}, "categories": []any{}, "campaign_id": "camp_01", "campaign_name": "Scale promotion", "x": randomTree(r, 2)}
	}
	v := map[string]any{"redeemables": map[string]any{"object": "list", "data_ref": "data", "data": data, "total": 104, "has_more": true}}
	b.Run("jsonx", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = Append(buf[:0], v)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(v)
		}
	})
}
