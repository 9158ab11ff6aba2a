package router

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tallyhq/tally/internal/httpx"
)

// connPool is a lean HTTP/1.1 client for one upstream: keep-alive
// connections reused LIFO, the request written and the response read on the
// caller's goroutine. net/http's Transport hands every request to two
// goroutines per connection over channels; on the forwarding path, where the
// router does nothing but relay, that handoff was a large part of its cost.
type connPool struct {
	addr        string
	dialTimeout time.Duration
	maxIdle     int
	// idleTimeout closes a connection left idle this long, before the
	// upstream's own keep-alive timeout can close it under a request.
	idleTimeout time.Duration

	mu    sync.Mutex
	idle  []*upConn // oldest first: put appends, get takes the last
	sweep *time.Timer
}

type upConn struct {
	net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	wire      *wireCounter
	idleSince time.Time
}

// wireCounter counts the bytes of a request that went onto the connection,
// as opposed to into its write buffer: none means the upstream cannot have
// seen any of it. It has no ReadFrom, so bufio cannot write past it.
type wireCounter struct {
	net.Conn
	n int
}

func (w *wireCounter) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	w.n += n
	return n, err
}

// responseHeaderTimeout bounds the wait for an upstream's answer.
const responseHeaderTimeout = 60 * time.Second

// idleConnTimeout is how long an upstream connection may wait for its next
// request: well below the services' keep-alive timeout
// (httpx.ServerIdleTimeout, 120 s), so the router always gives up a
// connection before the upstream does and never writes into one the
// upstream is closing.
const idleConnTimeout = httpx.ServerIdleTimeout - 30*time.Second

func newConnPool(addr string, dialTimeout time.Duration) *connPool {
	return &connPool{addr: addr, dialTimeout: dialTimeout, maxIdle: 1024, idleTimeout: idleConnTimeout}
}

// peekAfter is how long a connection may have been idle before an
// idempotent request checks, before writing into it, that the upstream has
// not closed it. A request that may have reached the upstream is retried
// only if it is idempotent (see roundTrip); so for those, on a connection
// used moments ago, the check (a syscall per request, about 2 % of the
// router's CPU at saturation) is left to that retry: the upstream closes a
// connection it just answered on only when it stops.
const peekAfter = time.Second

// get returns the most recently used idle connection that is still good, or
// a new one (always new when fresh). Connections idle too long, or that the
// upstream has closed meanwhile, are closed on the way; idempotent says the
// request may be retried once it reached the upstream, which spares the
// check of a connection idle for less than peekAfter.
func (p *connPool) get(ctx context.Context, fresh, idempotent bool) (*upConn, bool, error) {
	for !fresh {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if time.Since(c.idleSince) >= p.idleTimeout {
			// The others are older still.
			stale := p.idle
			p.idle = nil
			p.mu.Unlock()
			c.Close()
			for _, s := range stale {
				s.Close()
			}
			break
		}
		p.mu.Unlock()
		if (!idempotent || time.Since(c.idleSince) >= peekAfter) && peerClosed(c.Conn) {
			c.Close()
			continue
		}
		return c, true, nil
	}
	d := net.Dialer{Timeout: p.dialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, false, err
	}
	w := &wireCounter{Conn: nc}
	return &upConn{Conn: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(w, 16<<10), wire: w}, false, nil
}

func (p *connPool) put(c *upConn) {
	c.idleSince = time.Now()
	p.mu.Lock()
	if len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, c)
		if p.sweep == nil {
			p.sweep = time.AfterFunc(p.idleTimeout, p.sweepIdle)
		}
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	c.Close()
}

// sweepIdle closes the connections that have been idle for idleTimeout, so
// that a quiet upstream is not left holding them, and runs again when the
// oldest of the others is due.
func (p *connPool) sweepIdle() {
	now := time.Now()
	p.mu.Lock()
	k := 0
	for k < len(p.idle) && now.Sub(p.idle[k].idleSince) >= p.idleTimeout {
		k++
	}
	expired := make([]*upConn, k)
	copy(expired, p.idle[:k])
	p.idle = append(p.idle[:0], p.idle[k:]...)
	clear(p.idle[len(p.idle):cap(p.idle)])
	if len(p.idle) > 0 {
		p.sweep.Reset(p.idleTimeout - now.Sub(p.idle[0].idleSince))
	} else {
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, c := range expired {
		c.Close()
	}
}

// exchange is one request and its response on a pooled connection. The
// caller must call done when it has read the body (or given up on it).
type exchange struct {
	resp *http.Response
	conn *upConn
	pool *connPool
	stop func() bool
}

// sendError is a failed exchange on a connection that was established.
type sendError struct {
	err    error
	reused bool // a kept-alive connection, not one dialled for this request
	sent   bool // some bytes of the request went onto the connection
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

// roundTrip sends req, once more on a fresh connection when the first try
// failed in a way that makes that safe:
//   - nothing of the request reached the upstream: whatever the method (a
//     connection the upstream had closed is caught before writing, see get);
//   - it may have reached the upstream, on a kept-alive connection that broke
//     before any answer: only if the method is idempotent (GET, HEAD, OPTIONS,
//     PUT, DELETE). A POST that may have been processed is never sent twice;
//     the client gets the error.
//
// A dial error is not retried: the cluster is down, and it must be told
// within the dial timeout. The body is kept as it is sent so it can be sent
// again (up to maxReplay bytes; a longer one is not retried once sent).
func (p *connPool) roundTrip(ctx context.Context, req *http.Request) (*exchange, error) {
	var body *replayBody
	if req.Body != nil {
		body = &replayBody{r: req.Body}
		r := *req
		r.Body = body
		req = &r
	}
	for attempt := 0; ; attempt++ {
		// The retry dials afresh: the idle connections beside the one that
		// failed are likely as stale as it was.
		x, err := p.try(ctx, req, attempt > 0)
		if err == nil || attempt > 0 || ctx.Err() != nil || !retryable(err, req.Method) {
			return x, err
		}
		if body != nil {
			rb, ok := body.rewind()
			if !ok {
				return x, err
			}
			r := *req
			r.Body = rb
			req = &r
		}
	}
}

func retryable(err error, method string) bool {
	var se *sendError
	if !errors.As(err, &se) {
		return false // dial error
	}
	if !se.sent {
		return true
	}
	var ne net.Error
	if !se.reused || (errors.As(err, &ne) && ne.Timeout()) {
		return false // the upstream itself failed or is slow, not a stale connection
	}
	return idempotent(method)
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func (p *connPool) try(ctx context.Context, req *http.Request, fresh bool) (*exchange, error) {
	// The peek is spared only where the retry can stand in for it: an
	// idempotent request whose body, if any, can be sent again whole.
	replayable := req.Body == nil || (req.ContentLength > 0 && req.ContentLength <= maxReplay)
	c, reused, err := p.get(ctx, fresh, idempotent(req.Method) && replayable)
	if err != nil {
		return nil, err
	}
	// A client that goes away takes its upstream exchange with it.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	c.wire.n = 0
	fail := func(err error) (*exchange, error) {
		stop()
		c.Close()
		return nil, &sendError{err: err, reused: reused, sent: c.wire.n > 0}
	}
	_ = c.SetDeadline(time.Now().Add(responseHeaderTimeout))
	if err := writeRequest(c.bw, req); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(c.br, req)
	// An interim answer (100 Continue, 103 Early Hints) is not the answer:
	// taken for it, the final one would be left on the connection for the
	// next request to read as its own.
	for n := 0; err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 &&
		resp.StatusCode != http.StatusSwitchingProtocols; n++ {
		if n == maxInterim {
			return fail(errors.New("router: too many interim answers from the upstream"))
		}
		resp, err = http.ReadResponse(c.br, req)
	}
	if err != nil {
		return fail(err)
	}
	_ = c.SetDeadline(time.Time{})
	return &exchange{resp: resp, conn: c, pool: p, stop: stop}, nil
}

// maxInterim bounds the 1xx answers read before a request's final one.
const maxInterim = 5

// maxReplay bounds the request body the pool keeps to send again. Beyond
// it, a request whose bytes reached the upstream is not retried. (One that
// failed before any byte reached the wire has read at most the 16 KiB write
// buffer of its body, so it can always be sent again.)
const maxReplay = 64 << 10

// replayBody is a request body that can be read again from its start: it
// keeps what it has read, up to maxReplay bytes. Close is left to the
// server, which closes the incoming body when the handler returns; the
// request writer's Close must not end it before a retry has read it.
type replayBody struct {
	r    io.Reader
	kept []byte
	over bool  // more than maxReplay bytes were read
	err  error // a read error other than EOF: the body is not whole
}

func (b *replayBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if !b.over {
		if len(b.kept)+n > maxReplay {
			b.over, b.kept = true, nil
		} else {
			b.kept = append(b.kept, p[:n]...)
		}
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

func (b *replayBody) Close() error { return nil }

// rewind returns the body from its start: what was read so far, then the rest.
func (b *replayBody) rewind() (io.ReadCloser, bool) {
	if b.over || b.err != nil {
		return nil, false
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b.kept), b), b}, true
}

// done returns the connection to the pool when the whole body was read and
// both sides keep the connection alive; otherwise it closes it.
func (x *exchange) done(bodyRead bool) {
	canceled := !x.stop()
	x.resp.Body.Close()
	if bodyRead && !canceled && !x.resp.Close && x.conn.br.Buffered() == 0 {
		x.pool.put(x.conn)
		return
	}
	x.conn.Close()
}

// copyBody streams the response body to w, reporting whether it reached the end.
func copyBody(w io.Writer, r io.Reader, buf []byte, flush func()) bool {
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return false
			}
			if flush != nil {
				flush()
			}
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
}
