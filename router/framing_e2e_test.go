package router_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// A request with both Content-Length and Transfer-Encoding: chunked is
// refused at the edge, 400 in the API's error shape, and its connection
// closed: behind a proxy that frames it by its length, what the proxy took
// for the body would otherwise reach the router as a request of its own
// (here a second customer written with the project's keys). net/http drops
// Content-Length before the router's handler runs, so the test sends the
// bytes themselves.
func TestARequestWithContentLengthAndChunkedIsRefusedAtTheEdge(t *testing.T) {
	e := stacktest.Start(t, stacktest.Options{})
	p := e.CreateProject(t, "api")
	addr := strings.TrimPrefix(e.Stack.RouterURL, "http://")
	keys := "X-App-Id: " + p.AppID + "\r\nX-App-Token: " + p.AppToken + "\r\n"
	smuggled := `{"source_id":"smuggled","name":"Smuggled"}`
	inner := "POST /v1/customers HTTP/1.1\r\nHost: api.localhost\r\n" + keys +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(smuggled)) + "\r\n\r\n" + smuggled
	body := "0\r\n\r\n" + inner // a proxy's body by Content-Length; the chunked body ends at 0
	raw := "POST /v1/customers HTTP/1.1\r\nHost: api.localhost\r\n" + keys + "Content-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\nTransfer-Encoding: chunked\r\n\r\n" + body

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, raw)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var m map[string]any
	if res.StatusCode != 400 || json.Unmarshal(b, &m) != nil || m["code"] != float64(400) || m["key"] != "invalid_payload" ||
		!strings.Contains(m["details"].(string), "Content-Length and Transfer-Encoding") ||
		m["request_id"] == nil || m["request_id"] != res.Header.Get("X-Request-Id") {
		t.Errorf("%d %s, want 400 invalid_payload in the API's error shape", res.StatusCode, b)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if rest, err := io.ReadAll(br); len(rest) > 0 || (err != nil && !isReset(err)) {
		t.Errorf("after the refusal: %q, %v; want the connection closed", rest, err)
	}
	r := e.Do(t, "GET", stacktest.URL("api", "/v1/customers/smuggled"), p.Header(), nil)
	if r.Status != 404 {
		t.Fatalf("the smuggled request was served: GET /v1/customers/smuggled: %d %s", r.Status, r.Body)
	}
	// The same request with either header alone is served.
	for _, framing := range []string{"Content-Length: 2\r\n\r\n{}", "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "POST /v1/customers HTTP/1.1\r\nHost: api.localhost\r\n"+keys+"Content-Type: application/json\r\n"+framing)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%q: %v %v", framing, res, err)
		}
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "reset by peer") }
