package httpx_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/httpx"
)

// startFraming serves an echo of httpx.New on a public listener: /echo
// answers the body it read and the framing header it saw; /smuggled counts
// the requests that reached it.
func startFraming(t *testing.T) (addr string, smuggled *atomic.Int64) {
	t.Helper()
	e := httpx.New(httpx.Config{Service: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.Any("/echo", func(c echo.Context) error {
		b, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"body": string(b), "trailer": c.Request().Trailer.Get("X-Sum"),
			"marker": c.Request().Header.Values("Tally-Framing-Conflict")})
	})
	smuggled = &atomic.Int64{}
	e.Any("/smuggled", func(c echo.Context) error {
		smuggled.Add(1)
		return c.NoContent(http.StatusNoContent)
	})
	return httpx.StartPublic(t, e, httpx.PublicOptions{}), smuggled
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

// exchange writes raw on a new connection (in pieces of at most chunk
// bytes, when chunk > 0) and reads the answers to n requests, then whether
// the server closed the connection.
func exchange(t *testing.T, addr, raw string, n, chunk int) (answers []answer, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		if chunk <= 0 {
			_, _ = io.WriteString(c, raw)
			return
		}
		for i := 0; i < len(raw); i += chunk {
			if _, err := io.WriteString(c, raw[i:min(i+chunk, len(raw))]); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for i := 0; i < n; i++ {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v (after %v)", i+1, err, answers)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		a := answer{status: res.StatusCode, header: res.Header}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &a.body); err != nil {
				t.Fatalf("answer %d: %d %q is not JSON", i+1, res.StatusCode, b)
			}
		}
		answers = append(answers, a)
	}
	// Closed: EOF, or a reset if the client was still writing.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = br.ReadByte()
	var ne net.Error
	return answers, err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// isFramingRefusal reports whether a is the 400 of a request with both
// Content-Length and Transfer-Encoding, in the API's error shape.
func isFramingRefusal(a answer) bool {
	d, _ := a.body["details"].(string)
	id, _ := a.body["request_id"].(string)
	return a.status == 400 && a.body["code"] == float64(400) && a.body["key"] == "invalid_payload" &&
		strings.Contains(d, "Content-Length and Transfer-Encoding") && strings.HasPrefix(id, "v-") &&
		a.header.Get("X-Request-Id") == id
}

// A request with both Content-Length and Transfer-Encoding, which a proxy
// reading the length and net/http reading the chunks would end in
// different places, is refused 400 in the API's error shape and its
// connection closed: what a proxy took for its body is never served as a
// request of its own. net/http drops Content-Length before a handler runs,
// so only the bytes on the wire show it; the test sends them.
func TestARequestWithContentLengthAndChunkedIs400(t *testing.T) {
	addr, smuggled := startFraming(t)
	// What a proxy reading Content-Length: 4 takes for the body ends at
	// "0\r\n\r\n"; read as chunked, the body ends there too and the GET
	// after it would be a request of its own.
	smuggle := "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, raw := range map[string]string{
		"length first":    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggle,
		"chunked first":   "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n" + smuggle,
		"lower case":      "POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ncontent-length: 0\r\n\r\n" + smuggle,
		"bare line feeds": "POST /echo HTTP/1.1\nHost: x\nContent-Length: 4\nTransfer-Encoding: chunked\n\n" + smuggle,
		"folded value":    "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding:\r\n chunked\r\n\r\n" + smuggle,
		"HTTP/1.0":        "POST /echo HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggle,
		"a GET":           "GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggle,
		"an unknown path": "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggle,
		"OPTIONS *":       "OPTIONS * HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggle,
	} {
		for _, chunk := range []int{0, 7} { // at once, and in pieces that split lines
			answers, closed := exchange(t, addr, raw, 1, chunk)
			if !isFramingRefusal(answers[0]) || !closed {
				t.Errorf("%s (pieces of %d): %d %v %v, closed %v; want a 400 with the API's error and the connection closed",
					name, chunk, answers[0].status, answers[0].header, answers[0].body, closed)
			}
		}
	}
	if n := smuggled.Load(); n != 0 {
		t.Fatalf("%d smuggled requests were served", n)
	}
}

// The framing is followed request after request on a kept-alive
// connection, whatever frames the bodies before: the conflict in a fifth
// request is caught, and the requests before it are served as they were
// sent, bodies, chunk extensions and trailers included. A client's own
// Tally-Framing-Conflict header marks nothing and is not passed on.
func TestAConflictIsFoundAfterRequestsOfEveryFraming(t *testing.T) {
	addr, smuggled := startFraming(t)
	raw := "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world" +
		"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
		"5;ext=1\r\nab\r\nc\r\n3\r\nd\ne\r\n0\r\nX-Sum: 8\r\n\r\n" +
		"\r\n" + // after a POST, net/http skips a stray CRLF
		"GET /echo HTTP/1.1\r\nHost: x\r\nTally-Framing-Conflict: forged\r\n\r\n" +
		"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" +
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, chunk := range []int{0, 1, 13} {
		answers, closed := exchange(t, addr, raw, 5, chunk)
		want := []string{"hello world", "ab\r\ncd\ne", "", ""}
		for i, w := range want {
			a := answers[i]
			if a.status != 200 || a.body["body"] != w || a.body["marker"] != nil {
				t.Fatalf("pieces of %d: request %d: %d %v, want 200 with the body %q", chunk, i+1, a.status, a.body, w)
			}
		}
		if answers[1].body["trailer"] != "8" {
			t.Fatalf("pieces of %d: the trailer: %v", chunk, answers[1].body)
		}
		if !isFramingRefusal(answers[4]) || !closed {
			t.Fatalf("pieces of %d: the fifth request: %d %v, closed %v", chunk, answers[4].status, answers[4].body, closed)
		}
	}
	if n := smuggled.Load(); n != 0 {
		t.Fatalf("%d smuggled requests were served", n)
	}
}

// A chunked body net/http cannot read ends the connection there: no
// request is read from what follows it, so none can be smuggled in it.
func TestAMalformedChunkEndsTheConnection(t *testing.T) {
	addr, smuggled := startFraming(t)
	for name, body := range map[string]string{
		"not hex":              "zz\r\nabc\r\n0\r\n\r\n",
		"bare LF in chunk":     "3\nabc\r\n0\r\n\r\n",
		"no CRLF after data":   "3\r\nabcX\r\n0\r\n\r\n",
		"a trailer with LF":    "0\r\nX-Sum: 1\n\n",
		"a trailer with space": "0\r\n X-Sum: 1\r\n\r\n",
	} {
		raw := "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body +
			"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, raw)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		all, _ := io.ReadAll(c) // the body's answer, if any, then the close
		c.Close()
		if strings.Count(string(all), "HTTP/1.1 ") > 1 {
			t.Errorf("%s: more than one answer: %q", name, all)
		}
	}
	if n := smuggled.Load(); n != 0 {
		t.Fatalf("%d requests after a malformed chunked body were served", n)
	}
}
