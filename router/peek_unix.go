//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package router

import (
	"net"
	"syscall"
)

// peerClosed reports whether the upstream has closed (or reset) an idle
// connection, or sent on it unasked, which makes it unusable too. It peeks
// without blocking, so a request is never written into a connection the
// upstream has already given up.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false // cannot tell: a failed write is still caught by the byte count
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := true
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, the connection is open and quiet. Anything
		// else is an EOF (n == 0), unexpected bytes (n > 0) or an error.
		closed = rerr != syscall.EAGAIN && rerr != syscall.EWOULDBLOCK && rerr != syscall.EINTR
		return true
	})
	return err != nil || closed
}
