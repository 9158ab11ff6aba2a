package httpx_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

// A list's query is refused before its page is read, and a good one reaches
// the page parsed.
func TestWithListRefusesABadQueryBeforeReading(t *testing.T) {
	e := httpx.New(httpx.Config{Service: "test", Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	var read []listq.Query
	e.GET("/things", func(c echo.Context) error {
		return httpx.WithList(c, listq.Spec{Orders: []string{"-created_at", "created_at"}}, func(q listq.Query) (any, error) {
			read = append(read, q)
			return listq.List[string]{Data: []string{"a"}}, nil
		})
	})
	for _, tc := range []struct {
		query string
		code  int
	}{
		{"?limit=0", 400},
		{"?order=name", 400},
		{"?limit=5&order=created_at", 200},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/things"+tc.query, nil))
		if rec.Code != tc.code {
			t.Fatalf("%s: %d %s", tc.query, rec.Code, rec.Body)
		}
	}
	if len(read) != 1 || read[0].Limit != 5 || read[0].Order != "created_at" {
		t.Fatalf("pages read: %+v", read)
	}
}
