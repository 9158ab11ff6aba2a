//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package router

import "net"

// peerClosed cannot peek here; a write that fails before any byte reached
// the upstream is still retried, by the byte count of the connection.
func peerClosed(net.Conn) bool { return false }
