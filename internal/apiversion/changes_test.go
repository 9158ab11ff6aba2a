package apiversion

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

const publication = `{"id":"pub_1","object":"publication","customer_id":"cust_1","result":"SUCCESS",` +
	`"voucher":{"id":"v_1","code":"ABC","object":"voucher","holder_id":"cust_1"}}`

func TestPublicationToVoucherTakesThePublicationBackToItsVoucher(t *testing.T) {
	got, err := PublicationToVoucher(200, []byte(publication))
	if err != nil || string(got) != `{"id":"v_1","code":"ABC","object":"voucher","holder_id":"cust_1"}` {
		t.Fatalf("%s %v", got, err)
	}
	for _, c := range []struct {
		status int
		body   string
	}{
		{400, `{"code":400,"key":"no_voucher_suitable_for_publication","voucher":{"x":1}}`}, // errors pass
		{200, `{"id":"pub_1","object":"publication","result":"FAILURE"}`},                   // no voucher: unchanged
		{200, `not json`},
	} {
		if got, err := PublicationToVoucher(c.status, []byte(c.body)); err != nil || string(got) != c.body {
			t.Fatalf("%d %s: %s %v", c.status, c.body, got, err)
		}
	}
}

// The registry services mount answers the voucher to v2017-04-05 and the
// publication to v2017-04-20 and later, on both routes that publish.
func TestInterfaceRegistryAnswersPublishByVersion(t *testing.T) {
	e := echo.New()
	e.Use(Interface().Middleware(func(c echo.Context) string { return c.Request().Header.Get(Header) }))
	h := func(c echo.Context) error { return c.JSONBlob(http.StatusOK, []byte(publication)) }
	e.POST("/v1/publications", h)
	e.GET("/v1/publications/create", h)
	e.GET("/v1/publications", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]any{"object": "list", "publications": []any{}})
	})
	for _, c := range []struct{ method, path, version, object string }{
		{"POST", "/v1/publications", "v2017-04-05", "voucher"},
		{"GET", "/v1/publications/create?campaign=x", "v2017-04-05", "voucher"},
		{"POST", "/v1/publications", "v2017-04-20", "publication"},
		{"GET", "/v1/publications/create", "v2018-08-01", "publication"},
		{"GET", "/v1/publications", "v2017-04-05", "list"}, // the list is the same in every version
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(`{}`))
		req.Header.Set(Header, c.version)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != 200 || m["object"] != c.object {
			t.Fatalf("%s %s on %s: %d %s, want object %s", c.method, c.path, c.version, rec.Code, rec.Body, c.object)
		}
	}
}
