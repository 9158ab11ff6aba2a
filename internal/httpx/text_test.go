package httpx_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
)

func textServer() *echo.Echo {
	e := httpx.New(httpx.Config{Service: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.GET("/things/:thingId", func(c echo.Context) error { return c.JSON(200, map[string]string{"id": c.Param("thingId")}) })
	e.POST("/things", func(c echo.Context) error {
		var v map[string]any
		if err := httpx.Bind(c, &v); err != nil {
			return err
		}
		return c.JSON(200, v)
	})
	return e
}

func call(e *echo.Echo, method, target, body string) (int, string) {
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, "/", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(method, "/", nil)
	}
	r.URL.RawPath = ""
	r.URL.Path, r.URL.RawQuery, _ = strings.Cut(target, "?")
	if u, err := r.URL.Parse(target); err == nil {
		r.URL = u
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String()
}

// Text the database cannot store, in a path id, a query parameter or a JSON
// body, is refused with a 400 that names where it is; before, it came back
// as a 500 from PostgreSQL (path, query) or was silently changed (body).
func TestTextTheDatabaseCannotStoreIsA400NamingWhere(t *testing.T) {
	e := textServer()
	for _, c := range []struct{ method, target, body, names string }{
		{"GET", "/things/a%00b", "", "thingId"},
		{"GET", "/things/a%ffb", "", "thingId"},
		{"GET", "/things/a%c0%aeb", "", "thingId"},
		{"GET", "/things/x?starting_after_id=%00", "", "starting_after_id"},
		{"GET", "/things/x?limit=%ff", "", "limit"},
		{"POST", "/things", `{"name":"a\u0000b"}`, "name"},
		{"POST", "/things", "{\"name\":\"a\xffb\"}", "name"},
		{"POST", "/things", `{"metadata":{"k":["x","\ud800"]}}`, "metadata.k[1]"},
		{"POST", "/things", `{"metadata":{"n":1e400}}`, "metadata.n"},
		{"POST", "/things", `{"items":[{"price":1},{"price":-1E+999}]}`, "items[1].price"},
		{"POST", "/things", `{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "deeper than"},
		{"POST", "/things", "{\"k\xff\":1}", "property name"},
	} {
		code, body := call(e, c.method, c.target, c.body)
		var out struct{ Key, Details string }
		_ = json.Unmarshal([]byte(body), &out)
		if code != 400 || out.Key != "invalid_payload" || !strings.Contains(out.Details, c.names) {
			t.Errorf("%s %s %q: %d %s; want 400 naming %s", c.method, c.target, c.body, code, body, c.names)
		}
	}
	// What may be stored goes through unchanged, a U+FFFD the client wrote included.
	for _, body := range []string{`{"name":"caf\u00e9 \ufffd �","n":1.7e308,"m":-5e-324,"big":123456789012345678901234567890}`} {
		if code, out := call(e, "POST", "/things", body); code != 200 || !strings.Contains(out, "\ufffd \ufffd") {
			t.Errorf("%s: %d %s", body, code, out)
		}
	}
	if code, out := call(e, "GET", "/things/caf%C3%A9?x=%E2%82%AC", ""); code != 200 || !strings.Contains(out, "café") {
		t.Errorf("good text: %d %s", code, out)
	}
}
