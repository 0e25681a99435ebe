//go:build unix

package webhook

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open and silent: a
// receiver that closed it (its keep-alive timeout, a restart) left an EOF
// or a reset to read, and one that sent bytes unasked broke the protocol.
// One non-blocking peek, without consuming anything.
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = n < 0 && (rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK)
		return true // never wait for readiness
	})
	return err == nil && ok
}
