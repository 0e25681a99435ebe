package push

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
)

// DefaultMaxConnsPerIP is Config.MaxConnsPerIP when unset: a browser holds
// one push socket, so 64 leaves room for a household or a small office
// behind one NAT address while one client cannot take more than 64 of the
// node's sessions. Nodes serving large NATs (or behind a proxy that does
// not keep the client's address) raise it or turn it off.
const DefaultMaxConnsPerIP = 64

// sessionLimit counts push sessions (from the upgrade request until the
// socket closes), in all and per client address, and refuses one over
// either cap.
type sessionLimit struct {
	max, perIP int // 0: no cap
	mu         sync.Mutex
	total      int
	byIP       map[netip.Addr]int
}

func newSessionLimit(max, perIP int) *sessionLimit {
	return &sessionLimit{max: max, perIP: perIP, byIP: map[netip.Addr]int{}}
}

// acquire takes a session slot for the client at key; the release it
// returns gives it back (safe to call more than once). ok is false, with
// nothing taken, when a cap is reached.
func (l *sessionLimit) acquire(key netip.Addr) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.total >= l.max {
		return nil, false
	}
	if l.perIP > 0 && l.byIP[key] >= l.perIP {
		return nil, false
	}
	l.total++
	if l.perIP > 0 {
		l.byIP[key]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.perIP > 0 {
				if l.byIP[key]--; l.byIP[key] <= 0 {
					delete(l.byIP, key)
				}
			}
		})
	}, true
}

// clientKey is the address a session counts against: the peer's IP, an
// IPv6 address by its /64 (what one subscriber is usually given, so
// rotating through it gains nothing). Behind a reverse proxy it is the
// proxy's address.
func clientKey(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// releaseConn is a hijacked session socket that gives its slot back when
// closed.
type releaseConn struct {
	net.Conn
	release func()
}

func (c *releaseConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// SyscallConn is the wrapped socket's, so the session's socket is polled
// (ADR 0027); a wrapped conn without one is read on a goroutine.
func (c *releaseConn) SyscallConn() (syscall.RawConn, error) {
	return SyscallConn(c.Conn)
}

// errNoSyscallConn: the socket has no file descriptor to poll.
var errNoSyscallConn = errors.New("push: connection has no file descriptor")

// SyscallConn returns nc's raw connection if it has one (a wrapper of a
// *net.TCPConn that forwards SyscallConn included). A listener that wraps
// the connections it hands to the push service forwards SyscallConn with
// it, so push sessions stay polled instead of each taking a goroutine.
func SyscallConn(nc net.Conn) (syscall.RawConn, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, errNoSyscallConn
	}
	return sc.SyscallConn()
}

// hijackWriter hands the upgrader a socket wrapped in releaseConn, so the
// session's slot is released when the session closes it, wherever that
// happens.
type hijackWriter struct {
	http.ResponseWriter
	release  func()
	hijacked bool
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.hijacked = true
	return &releaseConn{Conn: nc, release: w.release}, brw, nil
}

func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
