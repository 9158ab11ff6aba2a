package router

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
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

	mu   sync.Mutex
	idle []*upConn
}

type upConn struct {
	net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

// responseHeaderTimeout bounds the wait for an upstream's answer.
const responseHeaderTimeout = 60 * time.Second

func newConnPool(addr string, dialTimeout time.Duration) *connPool {
	return &connPool{addr: addr, dialTimeout: dialTimeout, maxIdle: 1024}
}

func (p *connPool) get(ctx context.Context, fresh bool) (*upConn, bool, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 && !fresh {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, true, nil
	}
	p.mu.Unlock()
	d := net.Dialer{Timeout: p.dialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, false, err
	}
	return &upConn{Conn: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 16<<10)}, false, nil
}

func (p *connPool) put(c *upConn) {
	p.mu.Lock()
	if len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	c.Close()
}

// exchange is one request and its response on a pooled connection. The
// caller must call done when it has read the body (or given up on it).
type exchange struct {
	resp *http.Response
	conn *upConn
	pool *connPool
	stop func() bool
}

// errConnReused marks a failure on a kept-alive connection before any
// answer: the upstream may have closed it while idle, so a safe request can
// be sent again on a fresh one.
var errConnReused = errors.New("router: kept-alive upstream connection failed")

func (p *connPool) roundTrip(ctx context.Context, req *http.Request) (*exchange, error) {
	for attempt := 0; ; attempt++ {
		// The retry dials afresh: the idle connections beside the one that
		// failed are likely as stale as it was.
		x, err := p.try(ctx, req, attempt > 0)
		if errors.Is(err, errConnReused) && attempt == 0 && req.Body == nil {
			continue
		}
		return x, err
	}
}

func (p *connPool) try(ctx context.Context, req *http.Request, fresh bool) (*exchange, error) {
	c, reused, err := p.get(ctx, fresh)
	if err != nil {
		return nil, err
	}
	// A client that goes away takes its upstream exchange with it.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*exchange, error) {
		stop()
		c.Close()
		if reused && ctx.Err() == nil {
			return nil, errors.Join(errConnReused, err)
		}
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(responseHeaderTimeout))
	if err := req.Write(c.bw); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return fail(err)
	}
	_ = c.SetDeadline(time.Time{})
	return &exchange{resp: resp, conn: c, pool: p, stop: stop}, nil
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
