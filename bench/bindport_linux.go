package bench

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// bindNoPort sets IP_BIND_ADDRESS_NO_PORT on a socket dialled from a
// chosen source address: the kernel then picks the source port at
// connect, unique per destination, instead of at bind, unique per source
// address — so one source address's ~28,000 ports serve every node, and a
// reconnect storm does not scan the port range under bind for each
// attempt.
func bindNoPort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
