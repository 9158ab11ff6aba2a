package dbtest

import (
	"bytes"
	"net"
	neturl "net/url"
	"sync/atomic"
	"testing"
	"time"
)

// CommitCutter is a TCP proxy to a database server that, once armed,
// passes a transaction's COMMIT on to the server and then cuts the
// connection before the answer comes back: the client cannot tell whether
// its commit happened (it did). A connection lost during COMMIT, on either
// database, is what it makes; code that retries such a commit blindly
// applies its writes twice.
type CommitCutter struct {
	URL   string // the database's URL through the proxy
	l     net.Listener
	to    string
	armed atomic.Bool
}

// NewCommitCutter proxies the server of the database URL url; it stops
// with the test.
func NewCommitCutter(t testing.TB, url string) *CommitCutter {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &CommitCutter{l: l, to: u.Host}
	u.Host = l.Addr().String()
	c.URL = u.String()
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			go c.serve(client)
		}
	}()
	return c
}

// Arm cuts the next COMMIT's answer (once).
func (c *CommitCutter) Arm() { c.armed.Store(true) }

func (c *CommitCutter) serve(client net.Conn) {
	server, err := net.Dial("tcp", c.to)
	if err != nil {
		client.Close()
		return
	}
	defer server.Close()
	defer client.Close()
	var cutting atomic.Bool // from the COMMIT on, nothing goes back to the client
	go func() {
		defer client.Close() // the server hung up: so does the proxy
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && !cutting.Load() {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			// pgx commits with a simple query: 'Q', its length, "commit\0".
			commit := chunk[0] == 'Q' && bytes.Contains(bytes.ToLower(chunk), []byte("commit\x00")) && c.armed.CompareAndSwap(true, false)
			if commit {
				cutting.Store(true)
			}
			if _, werr := server.Write(chunk); werr != nil {
				return
			}
			if commit {
				time.Sleep(200 * time.Millisecond) // the server commits
				return                             // and its answer never arrives
			}
		}
		if err != nil {
			return
		}
	}
}
