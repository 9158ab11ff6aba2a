package router

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
)

// Headers writeRequest writes itself, from the request's fields, rather than
// from its header map (as net/http's Request.Write does).
var ownRequestHeaders = map[string]bool{
	"Host": true, "User-Agent": true, "Content-Length": true, "Transfer-Encoding": true, "Trailer": true,
}

// writeRequest writes req onto w as an HTTP/1.1 request, as net/http's
// Request.Write writes the requests the forwarder builds (a body of
// ContentLength bytes, chunked when the length is unknown; Content-Length: 0
// for a bodiless POST, PUT or PATCH; no User-Agent unless the
// header map has one; the headers flushed before a body is read), without
// its formatted writes, its sorting of the headers and its rewriting of
// every value: on the forwarding path that was about a fifth of the exchange
// with the upstream. The headers come from a request net/http's server has
// parsed, or from the router; a value holding a line break (which neither
// sends) is still written with spaces in its place, never as two lines.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	uri := req.URL.RequestURI()
	for i := 0; i < len(uri); i++ {
		if b := uri[i]; b <= ' ' || b == 0x7f {
			// A space would end the request target early and make the
			// rest of it the version.
			return errors.New("router: a space or a control character in the request's URL")
		}
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(req.Host)
	w.WriteString("\r\n")
	if ua := req.Header["User-Agent"]; len(ua) > 0 && ua[0] != "" {
		writeField(w, "User-Agent", ua[0])
	}
	length := req.ContentLength
	if req.Body == nil || req.Body == http.NoBody {
		length = 0
	} else if length == 0 {
		length = -1 // a body of unknown length
	}
	switch {
	case length > 0:
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.FormatInt(length, 10))
		w.WriteString("\r\n")
	case length < 0:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch:
		w.WriteString("Content-Length: 0\r\n") // many servers expect one for these
	}
	for k, vs := range req.Header {
		if ownRequestHeaders[k] {
			continue
		}
		for _, v := range vs {
			writeField(w, k, v)
		}
	}
	if _, err := w.WriteString("\r\n"); err != nil {
		return err
	}
	if length == 0 {
		return nil
	}
	// A body that fits in what is left of the write buffer (an event, an
	// order: nearly every request) goes with the headers in one write when
	// the caller flushes: flushed apart, the headers cost a write syscall
	// of their own on the router and a read and a wake-up on the upstream,
	// for an upstream that can do nothing with a known-length request
	// before its body anyway. A longer one, or one streamed by the client,
	// may take a while to arrive: the upstream gets the headers now.
	if length < 0 || length > int64(w.Available()) {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if length < 0 {
		// Each chunk goes on as it comes, as net/http's Transport sends a
		// streamed body: an upstream that reads the body as the client
		// writes it is not kept waiting for the write buffer to fill. (The
		// answer is still read only once the whole body is written: an
		// upstream that answers before the body ends is not heard until
		// then.)
		cw := httputil.NewChunkedWriter(w)
		if _, err := io.Copy(flushEach{cw, w}, req.Body); err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
		_, err := w.WriteString("\r\n") // no trailers
		return err
	}
	n, err := io.Copy(w, io.LimitReader(req.Body, length))
	if err != nil {
		return err
	}
	if n != length {
		return fmt.Errorf("router: a body of %d bytes where %d were announced: %w", n, length, io.ErrUnexpectedEOF)
	}
	return nil
}

// flushEach writes each chunk onto the connection as soon as it is written.
// It has no ReadFrom, so io.Copy writes it a read at a time.
type flushEach struct {
	chunks io.Writer
	w      *bufio.Writer
}

func (f flushEach) Write(p []byte) (int, error) {
	n, err := f.chunks.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// writeField writes one header line, any line break in the value as a space.
func writeField(w *bufio.Writer, k, v string) {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	w.WriteString(k)
	w.WriteString(": ")
	w.WriteString(textproto.TrimString(v))
	w.WriteString("\r\n")
}
