package httpx_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
)

// A body of the wrong type is refused saying which type the route takes
// and which came, where every route said "Expected a JSON object, got
// object." whatever it took.
func TestBindSaysWhatTypeWasExpectedAndWhatCame(t *testing.T) {
	bind := func(body string, v any) string {
		t.Helper()
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		err := httpx.Bind(echo.New().NewContext(req, httptest.NewRecorder()), v)
		var ae *apierr.Error
		if !errors.As(err, &ae) {
			t.Fatalf("%s: %v, want an apierr", body, err)
		}
		return ae.Details
	}
	var list []map[string]any
	var obj struct {
		Name string `json:"name"`
	}
	for _, c := range []struct {
		body string
		into any
		want string
	}{
		{`{"a":1}`, &list, "Expected a JSON array, got an object."},
		{`"x"`, &list, "Expected a JSON array, got a string."},
		{`12`, &list, "Expected a JSON array, got a number."},
		{`true`, &list, "Expected a JSON array, got a boolean."},
		{`[1]`, &obj, "Expected a JSON object, got an array."},
		{`1.5`, &obj, "Expected a JSON object, got a number."},
		{`{"name":{}}`, &obj, "Property name must be a string, got an object."},
	} {
		if got := bind(c.body, c.into); got != c.want {
			t.Errorf("%s: %q, want %q", c.body, got, c.want)
		}
	}
}

// The routes that read their array themselves say the same, naming their
// items.
func TestArrayErrorSaysWhatCame(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1}`: "Expected a JSON array of products, got an object.",
		` "x"`:    "Expected a JSON array of products, got a string.",
		`-3`:      "Expected a JSON array of products, got a number.",
		`false`:   "Expected a JSON array of products, got a boolean.",
		`null`:    "Expected a JSON array of products, got null.",
		`[]`:      "Expected a JSON array of products, got an empty array.",
		`[1, 2]`:  "Expected a JSON array of products, got an array holding something else.",
		`[1,`:     "Malformed JSON: expected a JSON array of products.",
	} {
		var ae *apierr.Error
		if err := httpx.ArrayError([]byte(body), "products"); !errors.As(err, &ae) || ae.Details != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
