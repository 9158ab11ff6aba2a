package httpx_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A handler's panic is that request's 500, in the API's error shape, logged
// with the stack; the server goes on serving.
func TestAPanickingHandlerIsALogged500(t *testing.T) {
	var logs syncBuffer
	e := httpx.New(httpx.Config{Service: "test", Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	e.GET("/boom", func(c echo.Context) error {
		var fields []string
		return c.String(http.StatusOK, fields[2])
	})
	e.GET("/ok", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) })

	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	var body struct {
		Code int    `json:"code"`
		Key  string `json:"key"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 500 || body.Code != 500 || body.Key != "internal_error" {
		t.Fatalf("%d %s (%v)", rec.Code, rec.Body, err)
	}
	if l := logs.String(); !strings.Contains(l, "index out of range") || !strings.Contains(l, "httpx_test.go") {
		t.Fatalf("the panic is not logged with its stack:\n%s", l)
	}
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ok", nil))
	if rec.Code != 200 {
		t.Fatalf("after the panic: %d %s", rec.Code, rec.Body)
	}
}
