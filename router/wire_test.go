package router

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeRequest must put on the wire what net/http's Request.Write would for
// every kind of request the forwarder sends: read back by net/http's own
// parser, both give the same request.
func TestWriteRequestIsReadAsRequestWriteIs(t *testing.T) {
	u, _ := url.Parse("http://regional:8081/v1/customers/cust_1?expand=a%2Cb&x=%20")
	u.RawPath = "/v1/customers/cust%2F1"
	for _, tc := range []struct {
		name, method string
		body         string
		length       int64 // -1: a body of unknown length
		header       http.Header
	}{
		{"GET without a body", "GET", "", 0, http.Header{"X-A": {"1", "2"}, "User-Agent": nil, "Accept": {"application/json"}}},
		{"HEAD", "HEAD", "", 0, http.Header{"User-Agent": {"sdk/1.0"}}},
		{"POST with a body", "POST", `{"source_id":"a"}`, 17, http.Header{"Content-Type": {"application/json"}, "Content-Length": {"17"}}},
		{"POST without a body", "POST", "", 0, http.Header{}},
		{"DELETE without a body", "DELETE", "", 0, http.Header{"X-Tally-Identity": {"v1|x.y"}}},
		{"PUT streamed", "PUT", strings.Repeat("chunk ", 5000), -1, http.Header{"Content-Type": {"text/csv"}}},
		{"a value with spaces around it", "GET", "", 0, http.Header{"X-B": {"  padded\t"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() *http.Request {
				r := &http.Request{Method: tc.method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
					Header: tc.header.Clone(), Host: u.Host, ContentLength: tc.length}
				if tc.body != "" {
					r.Body = io.NopCloser(strings.NewReader(tc.body)) // not a known in-memory reader
				}
				if tc.header["User-Agent"] == nil {
					r.Header["User-Agent"] = nil // as the forwarder sends it
				}
				return r
			}
			var ours, theirs bytes.Buffer
			w := bufio.NewWriter(&ours)
			if err := writeRequest(w, mk()); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			if err := mk().Write(&theirs); err != nil {
				t.Fatal(err)
			}
			a, b := readBack(t, ours.Bytes()), readBack(t, theirs.Bytes())
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("read back differently:\n ours   %+v\n theirs %+v\nwire:\n%s", a, b, ours.Bytes())
			}
		})
	}
}

type readRequest struct {
	Method, RequestURI, Host string
	Header                   http.Header
	ContentLength            int64
	TransferEncoding         []string
	Body                     string
}

func readBack(t *testing.T, wire []byte) readRequest {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(wire))
	r, err := http.ReadRequest(br)
	if err != nil {
		t.Fatalf("%v in\n%s", err, wire)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	if br.Buffered() != 0 {
		t.Fatalf("%d bytes after the request", br.Buffered())
	}
	return readRequest{r.Method, r.RequestURI, r.Host, r.Header, r.ContentLength, r.TransferEncoding, string(body)}
}

// A value cannot add a header line of its own, whatever it holds.
func TestWriteRequestKeepsALineBreakInAValueOnOneLine(t *testing.T) {
	u, _ := url.Parse("http://regional/v1/x")
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	r := &http.Request{Method: "GET", URL: u, Host: u.Host, Header: http.Header{"X-A": {"a\r\nX-Tally-Identity: forged"}}}
	if err := writeRequest(w, r); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	got := readBack(t, buf.Bytes())
	if got.Header.Get("X-Tally-Identity") != "" || got.Header.Get("X-A") != "a  X-Tally-Identity: forged" {
		t.Fatalf("headers read back: %v", got.Header)
	}
}

// A body that ends before its announced length is an error, never a
// request the upstream waits on for the rest.
func TestWriteRequestRefusesABodyShorterThanAnnounced(t *testing.T) {
	u, _ := url.Parse("http://regional/v1/x")
	r := &http.Request{Method: "POST", URL: u, Host: u.Host, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("short")), ContentLength: 10}
	if err := writeRequest(bufio.NewWriter(io.Discard), r); err == nil {
		t.Fatal("a 5-byte body announced as 10 was written")
	}
}

// A space in the target (a raw query is passed on as it came) would split
// the request line: it is refused, never written.
func TestWriteRequestRefusesASpaceInTheTarget(t *testing.T) {
	u := &url.URL{Scheme: "http", Host: "regional", Path: "/v1/x", RawQuery: "a=1 HTTP/1.1"}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeRequest(w, &http.Request{Method: "GET", URL: u, Host: u.Host, Header: http.Header{}}); err == nil {
		w.Flush()
		t.Fatalf("written:\n%s", buf.Bytes())
	}
}

// A body of unknown length goes on chunk by chunk as the client sends it:
// a client that sends the rest only once the upstream has had the first
// part (or an upstream that answers to it) is not left waiting on bytes the
// router holds in its write buffer.
func TestWriteRequestSendsEachChunkOfAStreamedBodyAsItComes(t *testing.T) {
	u, _ := url.Parse("http://regional/v1/imports")
	body, client := io.Pipe()
	wire := &signalWriter{grew: make(chan struct{}, 64)}
	done := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(wire, 16<<10) // as the pool's
		err := writeRequest(w, &http.Request{Method: "POST", URL: u, Host: u.Host, Header: http.Header{},
			Body: body, ContentLength: -1})
		if err == nil {
			err = w.Flush() // as the pool does once the request is written
		}
		done <- err
	}()
	waitWire := func(want string) {
		t.Helper()
		deadline := time.After(2 * time.Second)
		for !strings.Contains(wire.String(), want) {
			select {
			case <-wire.grew:
			case <-deadline:
				t.Fatalf("%q never reached the connection; it has:\n%s", want, wire.String())
			}
		}
	}
	go client.Write([]byte("first part,"))
	waitWire("first part,")
	go func() { client.Write([]byte("second part")); client.Close() }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(wire.String())))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(req.Body)
	if err != nil || string(got) != "first part,second part" {
		t.Fatalf("body read back %q, %v", got, err)
	}
}

// signalWriter is a connection's far end: what reached it, and a signal
// each time more did.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	grew chan struct{}
}

func (s *signalWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.buf.Write(p)
	s.mu.Unlock()
	select {
	case s.grew <- struct{}{}:
	default:
	}
	return n, err
}

func (s *signalWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// writes keeps the writes it is given, each apart. It has no ReadFrom, as
// the pool's wireCounter has none.
type writes struct{ each [][]byte }

func (w *writes) Write(p []byte) (int, error) {
	w.each = append(w.each, bytes.Clone(p))
	return len(p), nil
}

// A request whose body fits in the write buffer goes onto the connection
// in one write with its headers (an event's POST took two: the headers,
// then the body, each a syscall on the router and a read on the upstream);
// a longer one still sends its headers alone before reading its body.
func TestWriteRequestSendsASmallBodyWithItsHeadersInOneWrite(t *testing.T) {
	for _, size := range []int{200, 15 << 10, 40 << 10} {
		body := strings.Repeat("x", size)
		r := &http.Request{Method: "POST", URL: &url.URL{Path: "/v1/events"}, Host: "regional", ContentLength: int64(size),
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}
		var wire writes
		w := bufio.NewWriterSize(&wire, 16<<10) // the pool's
		if err := writeRequest(w, r); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		small := size < 15<<10+100
		if headersAlone := bytes.HasSuffix(wire.each[0], []byte("\r\n\r\n")); small && len(wire.each) != 1 {
			t.Errorf("a body of %d bytes went in %d writes, want 1 with its headers", size, len(wire.each))
		} else if !small && !headersAlone {
			t.Errorf("a body of %d bytes: the headers were not sent alone before it", size)
		}
		if got := readBack(t, bytes.Join(wire.each, nil)); got.Body != body {
			t.Errorf("a body of %d bytes read back as %d bytes", size, len(got.Body))
		}
	}
}
