package httpx_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
)

type thing struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// A resource's handlers made from its service's methods: the body bound (a
// bad one refused before the service is called), the path's id passed, 200
// with the service's answer, 204 for a deletion, the service's error
// answered as the error handler answers it.
func TestResourceHandlersCallTheServiceAsEachRouteSays(t *testing.T) {
	e := httpx.New(httpx.Config{Service: "test", Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	var calls []string
	create := func(_ context.Context, _ string, r thing) (thing, error) {
		calls = append(calls, "create "+r.Name)
		return thing{ID: "t1", Name: r.Name}, nil
	}
	get := func(_ context.Context, _, id string) (thing, error) {
		calls = append(calls, "get "+id)
		if id != "t1" {
			return thing{}, apierr.NotFound("thing", id)
		}
		return thing{ID: id, Name: "a"}, nil
	}
	update := func(_ context.Context, _, id string, r thing) (thing, error) {
		calls = append(calls, "update "+id+" "+r.Name)
		return thing{ID: id, Name: r.Name}, nil
	}
	del := func(_ context.Context, _, id string) error {
		calls = append(calls, "delete "+id)
		return nil
	}
	e.POST("/things", httpx.Create(create))
	e.GET("/things/:thingId", httpx.Read("thingId", get))
	e.PUT("/things/:thingId", httpx.Update("thingId", update))
	e.DELETE("/things/:thingId", httpx.Delete("thingId", del))
	for _, tc := range []struct {
		method, path, body string
		code               int
		answer             string
	}{
		{http.MethodPost, "/things", `{"name":"a"}`, 200, `{"id":"t1","name":"a"}`},
		{http.MethodPost, "/things", `{"name":1}`, 400, ""},
		{http.MethodGet, "/things/t1", "", 200, `{"id":"t1","name":"a"}`},
		{http.MethodGet, "/things/t2", "", 404, ""},
		{http.MethodPut, "/things/t1", `{"name":"b"}`, 200, `{"id":"t1","name":"b"}`},
		{http.MethodPut, "/things/t1", `[`, 400, ""},
		{http.MethodDelete, "/things/t1", "", 204, ""},
	} {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Fatalf("%s %s %s: %d %s", tc.method, tc.path, tc.body, rec.Code, rec.Body)
		}
		if tc.answer != "" && strings.TrimSpace(rec.Body.String()) != tc.answer {
			t.Fatalf("%s %s: answered %s, want %s", tc.method, tc.path, rec.Body, tc.answer)
		}
	}
	want := "create a|get t1|get t2|update t1 b|delete t1"
	if got := strings.Join(calls, "|"); got != want {
		t.Fatalf("the service was called as %q, want %q", got, want)
	}
}
