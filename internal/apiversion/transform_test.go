package apiversion

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// A change made in v2018-08-01 to one route: its requests and responses
// call a field "name" that older versions call "title". The handler knows
// only "name"; a client of an older version only "title".
func TestTransformsAdaptOlderVersionsAndHandlersSeeOnlyTheNewest(t *testing.T) {
	rename := func(from, to string) func([]byte) ([]byte, error) {
		return func(b []byte) ([]byte, error) {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, err
			}
			if v, ok := m[from]; ok {
				m[to] = v
				delete(m, from)
			}
			return json.Marshal(m)
		}
	}
	reg := NewRegistry()
	for _, method := range []string{"GET", "POST"} {
		reg.Add(Transform{Method: method, Route: "/v1/things/:id", Since: "v2018-08-01",
			Request:  rename("title", "name"),
			Response: func(_ int, b []byte) ([]byte, error) { return rename("name", "title")(b) }})
	}
	// A change of an earlier version on the same route: applied after it
	// on the way back, before it on the way in.
	reg.Add(Transform{Method: "GET", Route: "/v1/things/:id", Since: "v2017-04-20",
		Response: func(_ int, b []byte) ([]byte, error) { return rename("title", "label")(b) }})

	var seen map[string]any
	e := echo.New()
	e.Use(reg.Middleware(func(c echo.Context) string { return c.Request().Header.Get(Header) }))
	e.GET("/v1/things/:id", func(c echo.Context) error {
		if c.Param("id") == "missing" {
			return echo.NewHTTPError(http.StatusNotFound, "no such thing")
		}
		return c.JSON(http.StatusOK, map[string]any{"id": c.Param("id"), "name": "Mug"})
	})
	e.POST("/v1/things/:id", func(c echo.Context) error {
		seen = nil
		if err := json.NewDecoder(c.Request().Body).Decode(&seen); err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, seen)
	})
	do := func(method, path, version, body string) (int, map[string]any) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set(Header, version)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		return rec.Code, m
	}
	if _, m := do("GET", "/v1/things/1", "v2018-08-01", ""); m["name"] != "Mug" || m["title"] != nil {
		t.Fatalf("newest: %v", m)
	}
	if _, m := do("GET", "/v1/things/1", "v2017-04-20", ""); m["title"] != "Mug" || m["name"] != nil {
		t.Fatalf("v2017-04-20: %v", m)
	}
	if _, m := do("GET", "/v1/things/1", "v2017-04-05", ""); m["label"] != "Mug" || m["title"] != nil {
		t.Fatalf("v2017-04-05, both changes taken back newest first: %v", m)
	}
	status, m := do("POST", "/v1/things/1", "v2017-04-20", `{"title":"Cup"}`)
	if status != 201 || seen["name"] != "Cup" || seen["title"] != nil || m["title"] != "Cup" {
		t.Fatalf("an old request: the handler saw %v, the client got %d %v", seen, status, m)
	}
	if status, _ := do("GET", "/v1/things/missing", "v2017-04-20", ""); status != 404 {
		t.Fatalf("an error passes through: %d", status)
	}
}

func TestVersionsAreKnownAndOrdered(t *testing.T) {
	if !Known("v2017-04-05") || !Known(Latest) || Known("v2019-01-01") || Known("") {
		t.Fatal("known versions")
	}
	if Latest != "v2018-08-01" || !KnownWebhook("v2024-01-01") || KnownWebhook("v2018-08-01") {
		t.Fatal("latest and webhook versions")
	}
	e := Invalid("X-Voucherify-API-Version", "v1")
	if e.Status != 400 || e.Key != "invalid_api_version" || !strings.Contains(e.Details, "v2017-04-05, v2017-04-20, v2018-08-01") {
		t.Fatalf("%+v", e)
	}
}
