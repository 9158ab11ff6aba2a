package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A client's "Expect: 100-continue" must not leave the upstream's final
// answer to a POST on a pooled connection, where the next request (a GET,
// from anyone) reads it as its own.
func TestAnExpectContinuePostDoesNotAnswerTheNextGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		time.Sleep(100 * time.Millisecond)
		io.WriteString(w, "answer to "+r.Method)
	}))
	t.Cleanup(srv.Close)
	g := newEdge(t, srv)
	req, _ := http.NewRequest("POST", g.url+"/v1/thing", strings.NewReader(`{"a":1}`))
	req.Header.Set("Expect", "100-continue")
	res, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "answer to POST" {
		t.Fatalf("POST answered %d %q", res.StatusCode, b)
	}
	time.Sleep(200 * time.Millisecond) // the POST's answer is now waiting on the pooled connection
	st, body := g.do(t, "GET", "/v1/other", "")
	if body != "answer to GET" {
		t.Fatalf("GET answered %d %q", st, body)
	}
}

// An upstream's interim answer (103 Early Hints) is skipped for the final
// one, which is the request's, and nothing is left for the next request.
func TestAnInterimAnswerIsNotTakenForTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
		}
		io.WriteString(w, "answer to "+r.Method)
	}))
	t.Cleanup(srv.Close)
	g := newEdge(t, srv)
	if st, body := g.do(t, "POST", "/v1/thing", `{"a":1}`); st != 200 || body != "answer to POST" {
		t.Fatalf("POST answered %d %q", st, body)
	}
	if st, body := g.do(t, "GET", "/v1/other", ""); st != 200 || body != "answer to GET" {
		t.Fatalf("GET answered %d %q", st, body)
	}
}
