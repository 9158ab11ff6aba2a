package httpx

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PublicOptions are the limits of a listener that faces the internet: a
// slow or stalled client holds a connection for seconds, not minutes, and
// one address cannot hold more than its share of the edge's descriptors.
type PublicOptions struct {
	// ReadHeaderTimeout bounds reading a request's line and headers
	// (default 5 s), ReadTimeout the whole request with its body (default
	// 60 s), WriteTimeout the handling and the response (default 120 s),
	// IdleTimeout a kept-alive connection between requests (default 60 s).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConnsPerIP caps the open connections of one client address, an
	// IPv6 one's /64 (default 256); connections past it are closed as
	// soon as accepted.
	MaxConnsPerIP int
	// Exempt addresses (trusted proxies, whose connections carry many
	// clients) are not capped.
	Exempt func(netip.Addr) bool
	// Refused, when set, counts the connections closed at the cap.
	Refused prometheus.Counter
	// TLS, when set, makes the listener serve HTTPS (TLS 1.2 at least)
	// with its certificates (GetCertificate); see ServePublic.
	TLS *tls.Config
}

func (o *PublicOptions) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ReadHeaderTimeout, 5*time.Second)
	def(&o.ReadTimeout, 60*time.Second)
	def(&o.WriteTimeout, 120*time.Second)
	def(&o.IdleTimeout, 60*time.Second)
	if o.MaxConnsPerIP == 0 {
		o.MaxConnsPerIP = 256
	}
}

// ServePublic is Serve for a public listener, with o's deadlines and cap.
//
// With o.TLS, each connection is counted against its address's cap as
// accepted (before its handshake), then TLS is terminated, and the
// framing follower reads the decrypted bytes: the order is capped TCP,
// TLS, framingConn. net/http then sees a framingConn, not a *tls.Conn, so
// the request's TLS state is put back from the connection (r.TLS, which
// the router's X-Forwarded-Proto reads), and only HTTP/1.1 is offered:
// HTTP/2 is framed in binary frames the follower does not read, and
// net/http serves it only on a bare *tls.Conn. Requests' RemoteAddr is the
// TCP peer's, as without TLS.
func ServePublic(ctx context.Context, l net.Listener, h http.Handler, o PublicOptions) error {
	o.defaults()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout, DisableGeneralOptionsHandler: true}
	var capped net.Listener = &perIPListener{Listener: l, max: o.MaxConnsPerIP, exempt: o.Exempt, refused: o.Refused,
		open: map[netip.Addr]int{}}
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
		cfg.NextProtos = []string{"http/1.1"}
		capped = tls.NewListener(capped, cfg)
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){} // no HTTP/2
		srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			if fc, ok := c.(*framingConn); ok {
				if tc, ok := fc.Conn.(*tls.Conn); ok {
					return context.WithValue(ctx, tlsConnKey{}, tc)
				}
			}
			return ctx
		}
		srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc, ok := r.Context().Value(tlsConnKey{}).(*tls.Conn); ok && r.TLS == nil {
				st := tc.ConnectionState()
				r.TLS = &st
			}
			h.ServeHTTP(w, r)
		})
	}
	// Framing is followed at the edge only: the services behind it are
	// reached through the router, whose writer frames each request one way.
	return serve(ctx, srv, framingListener{capped})
}

type tlsConnKey struct{}

// perIPListener closes, as soon as it is accepted, a connection whose
// remote address already holds max open ones.
type perIPListener struct {
	net.Listener
	max     int
	exempt  func(netip.Addr) bool
	refused prometheus.Counter
	mu      sync.Mutex
	open    map[netip.Addr]int
}

func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
		if err != nil {
			return c, nil // not an IP connection (a test pipe): nothing to count
		}
		ip := ap.Addr().Unmap().WithZone("")
		if l.exempt != nil && l.exempt(ip) {
			return c, nil
		}
		ip = ClientKey(ip)
		l.mu.Lock()
		if l.open[ip] >= l.max {
			l.mu.Unlock()
			// Counted before it is closed, so that whoever sees the close
			// (a test, an operator's probe) also sees it counted.
			if l.refused != nil {
				l.refused.Inc()
			}
			c.Close()
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *perIPListener) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// CloseWrite half-closes the connection, as net/http does before closing
// one whose request it did not read whole (its lingering close).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// serve runs srv on l until ctx ends, then shuts down gracefully, letting
// requests in flight finish for up to 10 seconds. Its connections are read
// through a framingConn, so that a request with both Content-Length and
// Transfer-Encoding reaches srv's handler marked (RefuseAmbiguousFraming);
// net/http's own answer to OPTIONS * (DisableGeneralOptionsHandler, which
// the callers set) would skip that handler.
func serve(ctx context.Context, srv *http.Server, l net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ClientKey is what per-client limits count an address by: an IPv4
// address (an IPv4-mapped one as IPv4), or an IPv6 address's /64, which one
// subscriber holds whole and whose addresses its host may take at will
// (each would otherwise be a fresh client, and the limit none).
func ClientKey(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a
}
