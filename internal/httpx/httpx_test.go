package httpx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/telemetry"
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

// A client that hangs up while its request is worked on is logged and
// counted as 499, client closed request, and not as a 500 internal error:
// what failed is the request's context, canceled when the connection
// closed. A cancellation of something else, the client still waiting, is
// a 500 as before.
func TestAClientThatHangsUpIsA499NotA500(t *testing.T) {
	var logs syncBuffer
	m := telemetry.NewMetrics("test", "")
	e := httpx.New(httpx.Config{Service: "test", Metrics: m,
		Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	started := make(chan struct{})
	e.GET("/slow", func(c echo.Context) error {
		close(started)
		<-c.Request().Context().Done() // a query, interrupted as the client leaves
		return fmt.Errorf("db: reading rows: %w", c.Request().Context().Err())
	})
	e.GET("/other", func(c echo.Context) error {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return fmt.Errorf("a job of the server's own: %w", ctx.Err())
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	count := func(route, code string) float64 { return m.Requests(http.MethodGet, route, code) }

	ctx, hangUp := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/slow", nil)
	done := make(chan error, 1)
	go func() {
		res, err := srv.Client().Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-started
	hangUp()
	if err := <-done; err == nil {
		t.Fatal("the request was answered though its client hung up")
	}
	deadline := time.Now().Add(5 * time.Second)
	for count("/slow", "499") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := count("/slow", "499"); n != 1 {
		t.Fatalf("requests counted with code 499: %v, want 1; logs:\n%s", n, logs.String())
	}
	for _, code := range []string{"500", "503", "200"} {
		if n := count("/slow", code); n != 0 {
			t.Fatalf("the hung-up request is counted with code %s too", code)
		}
	}
	l := logs.String()
	if !strings.Contains(l, `"msg":"request canceled by client"`) || !strings.Contains(l, `"status":499`) ||
		strings.Contains(l, `"status":500`) || strings.Contains(l, `"level":"ERROR"`) {
		t.Fatalf("the hung-up request is not logged as a 499 alone:\n%s", l)
	}

	res, err := srv.Client().Get(srv.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 500 || count("/other", "500") != 1 {
		t.Fatalf("a cancellation with the client still there: %d, counted %v as 500", res.StatusCode, count("/other", "500"))
	}
}

// An answer carries its length, however long: the router passes a body of
// unknown length on as a stream, flushing each piece it reads.
func TestAnAnswerCarriesItsLength(t *testing.T) {
	e := httpx.New(httpx.Config{Service: "test", Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	long := strings.Repeat("x", 64<<10)
	e.GET("/long", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]any{"long": long}) })
	e.GET("/missing", func(c echo.Context) error { return echo.ErrNotFound })
	srv := httptest.NewServer(e)
	defer srv.Close()
	for path, status := range map[string]int{"/long": 200, "/missing": 404} {
		res, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != status || res.ContentLength != int64(len(body)) || len(res.TransferEncoding) != 0 {
			t.Fatalf("%s: %d, Content-Length %d of a body of %d, Transfer-Encoding %v", path, res.StatusCode, res.ContentLength,
				len(body), res.TransferEncoding)
		}
	}
}
