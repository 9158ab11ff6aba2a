package router

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/identity"
)

// newTransport is the one transport every forwarded request shares, with
// enough idle connections per upstream that a busy router never re-dials.
func newTransport(dialTimeout time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       idleConnTimeout, // below the upstream's keep-alive timeout
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // pass encodings through untouched
		ForceAttemptHTTP2:     false,
	}
}

// Hop-by-hop headers (RFC 9110 §7.6.1) are the connection's, not the message's.
var hopHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// Headers the router consumes: credentials never travel past the edge, and a
// client cannot smuggle its own identity or forwarding claims upstream.
// Expect is the router's to meet: its server sends the client's 100 Continue
// as the forward reads the body; passed on, it would have the upstream send
// one more interim answer down the pooled connection.
var consumedHeaders = map[string]bool{
	"X-App-Token": true, "X-Management-Token": true, "X-Client-Token": true, "Authorization": true,
	"X-Tally-Identity": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
	"Forwarded": true, "X-Real-Ip": true, "X-Request-Id": true, "Expect": true,
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

type forwarder struct {
	transport   *http.Transport // for https upstreams
	pools       sync.Map        // host:port → *connPool, for http upstreams
	dialTimeout time.Duration
	propagator  propagation.TextMapPropagator
}

func newForwarder(dialTimeout time.Duration) *forwarder {
	return &forwarder{
		transport:   newTransport(dialTimeout),
		dialTimeout: dialTimeout,
		propagator:  otel.GetTextMapPropagator(),
	}
}

func (f *forwarder) pool(host string) *connPool {
	if p, ok := f.pools.Load(host); ok {
		return p.(*connPool)
	}
	p, _ := f.pools.LoadOrStore(host, newConnPool(host, f.dialTimeout))
	return p.(*connPool)
}

// roundTrip sends out on the lean pool for plain HTTP, on the shared
// transport for HTTPS; done must be called once the body is consumed.
func (f *forwarder) roundTrip(ctx context.Context, out *http.Request) (*http.Response, func(bool), error) {
	if out.URL.Scheme == "http" {
		host := out.URL.Host
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(host, "80")
		}
		x, err := f.pool(host).roundTrip(ctx, out)
		if err != nil {
			return nil, nil, err
		}
		return x.resp, x.done, nil
	}
	resp, err := f.transport.RoundTrip(out.WithContext(ctx))
	if err != nil {
		return nil, nil, err
	}
	return resp, func(bool) { resp.Body.Close() }, nil
}

// forward sends the request to upstream and streams the answer back.
// upstreamName names the target in errors ("cluster us1", "management").
// version, when set, is the API version the request is served at, named
// on its span with the upstream: one SetAttributes call, as each grows the
// span's attributes (a copy of them all, about a kilobyte a request).
func (f *forwarder) forward(c echo.Context, upstream *url.URL, upstreamName, signedIdentity string, client clientAddr, version string) error {
	in := c.Request()
	// The request's one span in the router is its server span (DESIGN.md):
	// the upstream's server span is its child, by the trace context sent
	// along. A client span of the forward's own doubled the router's spans
	// per request and timed nothing the upstream's server span does not.
	ctx := in.Context()
	span := trace.SpanFromContext(ctx)
	if version != "" {
		span.SetAttributes(attribute.String("tally.upstream", upstreamName), attribute.String("tally.api_version", version))
	} else {
		span.SetAttributes(attribute.String("tally.upstream", upstreamName))
	}

	outURL := *upstream
	outURL.Path = singleJoin(upstream.Path, in.URL.Path)
	if in.URL.RawPath != "" {
		outURL.RawPath = singleJoin(upstream.Path, in.URL.RawPath)
	}
	outURL.RawQuery = in.URL.RawQuery

	h := make(http.Header, len(in.Header)+6)
	connectionTokens := in.Header.Get("Connection")
	for k, vs := range in.Header {
		if hopHeaders[k] || consumedHeaders[k] || (connectionTokens != "" && listed(connectionTokens, k)) {
			continue
		}
		h[k] = vs
	}
	if client.chain != "" {
		h.Set("X-Forwarded-For", client.chain+", "+client.ip)
	} else {
		h.Set("X-Forwarded-For", client.ip)
	}
	h.Set("X-Forwarded-Host", in.Host)
	if in.TLS != nil {
		h.Set("X-Forwarded-Proto", "https")
	} else if client.proto != "" {
		h.Set("X-Forwarded-Proto", client.proto)
	} else {
		h.Set("X-Forwarded-Proto", "http")
	}
	h.Set(apierr.HeaderRequestID, c.Response().Header().Get(apierr.HeaderRequestID))
	h.Set(identity.Header, signedIdentity)
	if _, ok := in.Header["User-Agent"]; !ok {
		h["User-Agent"] = nil // keep Go from adding its own
	}
	f.propagator.Inject(ctx, propagation.HeaderCarrier(h))

	body := &clientBody{ReadCloser: in.Body}
	out := (&http.Request{
		Method:        in.Method,
		URL:           &outURL,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          body,
		ContentLength: in.ContentLength,
		Host:          upstream.Host,
	})
	if in.ContentLength == 0 {
		out.Body = nil // nothing to send, nothing to keep for a retry
	}

	resp, done, err := f.roundTrip(ctx, out)
	if err != nil {
		span.RecordError(err)
		if body.err != nil {
			// The client's body could not be read (a malformed chunk, a
			// body cut short): the client's fault, not the upstream's, and
			// a 4xx leaves a server span's status unset.
			return apierr.InvalidPayload("The request body could not be read: " + body.err.Error() + ".")
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// The client left: nobody to answer, and no upstream failure.
			// The error handler logs and counts it as 499, not as a 200.
			return ctx.Err()
		}
		span.SetStatus(codes.Error, "upstream unreachable")
		return upstreamError(upstreamName, err)
	}

	rh := c.Response().Header()
	respConnection := resp.Header.Get("Connection")
	for k, vs := range resp.Header {
		if hopHeaders[k] || k == apierr.HeaderRequestID || (respConnection != "" && listed(respConnection, k)) {
			continue
		}
		rh[k] = vs
	}
	c.Response().WriteHeader(resp.StatusCode)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var flush func()
	if resp.ContentLength == -1 || resp.Header.Get("Content-Type") == "text/event-stream" {
		flush = c.Response().Flush // a stream: pass it on as it comes
	}
	complete := copyBody(c.Response(), resp.Body, *bp, flush)
	done(complete)
	if !complete {
		span.SetStatus(codes.Error, "response body interrupted")
	}
	return nil // headers are sent; an error now can only be recorded
}

// clientBody is the client's request body as forwarded, remembering why a
// read of it failed.
type clientBody struct {
	io.ReadCloser
	err error
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// upstreamError says the target cannot be reached, quickly and as JSON.
func upstreamError(name string, err error) error {
	var ne net.Error
	if errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		e := apierr.Unavailable("The " + name + " is unavailable right now; try again shortly.")
		e.Cause = err
		return e
	}
	return &apierr.Error{Status: http.StatusBadGateway, Key: "bad_gateway", Message: "Bad gateway",
		Details: "The " + name + " gave an invalid answer.", Cause: err}
}

func listed(list, name string) bool {
	for _, tok := range strings.Split(list, ",") {
		if strings.EqualFold(strings.TrimSpace(tok), name) {
			return true
		}
	}
	return false
}

// upstreamPath is the escaped path a request is forwarded to, which its
// identity is signed for.
func upstreamPath(upstream *url.URL, in *http.Request) string {
	return singleJoin(upstream.EscapedPath(), in.URL.EscapedPath())
}

func singleJoin(a, b string) string {
	if a == "" || a == "/" {
		return b
	}
	return strings.TrimSuffix(a, "/") + "/" + strings.TrimPrefix(b, "/")
}
