package httpx

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// StartPublic serves h with ServePublic on a free loopback port until the
// test ends, and returns the address: the server of this package's tests,
// in it and outside (httpx_test).
func StartPublic(t *testing.T, h http.Handler, o PublicOptions) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ServePublic(ctx, l, h, o)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}
