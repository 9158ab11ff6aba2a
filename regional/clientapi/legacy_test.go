package clientapi

import (
	"net/url"
	"reflect"
	"strconv"
	"testing"
)

// The deep-object query the client SDK writes, read into objects and
// arrays; malformed keys refused.
func TestDeepObject(t *testing.T) {
	q, _ := url.ParseQuery("code=A&item[1][quantity]=2&item[0][product_id]=p0&item[1][product_id]=p1&customer[metadata][tier]=gold" +
		"&tags[]=x&tags[]=y&order[items][0][price]=100&metadata[01]=kept")
	got, err := deepObject(q)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"code": "A",
		"item":     []any{map[string]any{"product_id": "p0"}, map[string]any{"product_id": "p1", "quantity": "2"}},
		"customer": map[string]any{"metadata": map[string]any{"tier": "gold"}},
		"tags":     []any{"x", "y"},
		"order":    map[string]any{"items": []any{map[string]any{"price": "100"}}},
		"metadata": map[string]any{"01": "kept"}, // not an index: an object's key
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	for _, bad := range []string{"a[", "a]", "[a]=1", "a[b]c=1", "a[[b]]=1", "a=1&a[b]=2", "a[b]=1&a=2",
		"a[b][c][d][e][f][g]=1", "a[][b]=1"} {
		q, _ := url.ParseQuery(bad)
		if _, err := deepObject(q); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	many := url.Values{}
	for i := 0; i < 1001; i++ {
		many.Set("item["+strconv.Itoa(i)+"]", "x")
	}
	if _, err := deepObject(many); err == nil {
		t.Error("1001 elements accepted")
	}
	// Numbers where the order has them; other text left to be refused.
	o, err := legacyOrder(map[string]any{"amount": "1500", "item": []any{map[string]any{"quantity": "2", "price": "7.5", "sku": "12"}}})
	if err != nil || o["amount"] != int64(1500) || o["items"].([]any)[0].(map[string]any)["quantity"] != int64(2) ||
		o["items"].([]any)[0].(map[string]any)["price"] != 7.5 || o["items"].([]any)[0].(map[string]any)["sku"] != "12" {
		t.Fatalf("order: %v %v", o, err)
	}
}
