package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/push"
)

// Socket budget. A node's open files are its listeners' connections, push
// sessions, the store's connections and files, and outbound deliveries;
// when any kind takes them all, the others fail ("too many open files").
// So the derived defaults split RLIMIT_NOFILE (the soft limit, raised to
// the hard one at start):
//
//	reserve   = min(128 + 2 × --workers, limit / 2)  store, logs, listeners, node-to-node
//	                                                  and webhook deliveries (in flight
//	                                                  and kept alive)
//	budget    = limit − reserve
//	--admin-max-conns = min(budget / 4, 1024)         only with --admin-listen
//	--max-conns       = budget − admin share          --listen and --push-listen together
//	--push-max-conns  = --max-conns − min(--max-conns / 4, 512)
//
// so push sessions always leave at least a quarter of the public
// connections (up to 512) to publishers, senders and health checks. (A
// listener at its cap also holds the one connection it accepted and
// waits with: at most one file per listener beyond the caps.) With
// 20,000 files and 64 workers: reserve 256, --max-conns 19,744,
// --push-max-conns 19,232; with `ulimit -n 256`: reserve 128,
// --max-conns 128, --push-max-conns 96.
const (
	baseReserve = 128
	// assumedFileLimit stands in for RLIMIT_NOFILE where there is none.
	assumedFileLimit = 8192
	adminShareMax    = 1024
	apiShareMax      = 512
)

// connLimits are the resolved socket caps of a node.
type connLimits struct {
	fileLimit int // soft RLIMIT_NOFILE (0: unknown)
	reserve   int
	public    int // --max-conns
	admin     int // --admin-max-conns (0 without --admin-listen)
	push      int // --push-max-conns
	pushPerIP int // --push-max-conns-per-ip (0: no cap)
}

// resolveConnLimits fills the caps c leaves at 0 from files (the soft
// RLIMIT_NOFILE, 0 when unknown), as the formula above says.
func resolveConnLimits(c *config, files int) connLimits {
	l := connLimits{fileLimit: files, pushPerIP: c.PushMaxConnsPerIP}
	if files <= 0 {
		files = assumedFileLimit
	}
	l.reserve = min(baseReserve+2*c.Workers, files/2)
	budget := files - l.reserve
	if c.AdminListen != "" {
		l.admin = c.AdminMaxConns
		if l.admin <= 0 {
			l.admin = max(min(budget/4, adminShareMax), 1)
		}
	}
	l.public = c.MaxConns
	if l.public <= 0 {
		l.public = max(budget-l.admin, 1)
	}
	l.push = c.PushMaxConns
	if l.push <= 0 {
		l.push = max(l.public-min(l.public/4, apiShareMax), 1)
	}
	return l
}

func (l connLimits) log(logger *slog.Logger) {
	logger.Info("connection limits", "rlimit_nofile", l.fileLimit, "reserve", l.reserve, "max_conns", l.public,
		"admin_max_conns", l.admin, "push_max_conns", l.push, "push_max_conns_per_ip", l.pushPerIP)
	if l.push > l.public {
		logger.Warn("--push-max-conns exceeds --max-conns: the listener's limit caps push sessions first",
			"push_max_conns", l.push, "max_conns", l.public)
	}
}

// connSlots is a count of open connections shared by the listeners that
// draw on it.
type connSlots chan struct{}

// limitListener hands out a connection only while its slots have room:
// at the cap Accept holds the one connection it took and waits until
// another closes (the next ones queue in the kernel's backlog, holding no
// file here). Taking the slot after the accept, not before, keeps an idle
// listener from holding a slot that a busy one sharing it needs.
type limitListener struct {
	net.Listener
	slots     connSlots
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, slots connSlots) *limitListener {
	return &limitListener{Listener: ln, slots: slots, done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		_ = c.Close()
		return nil, net.ErrClosed
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// slotConn gives its slot back on its first Close (hijacked push
// sessions included: the session closes the same conn).
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// SyscallConn forwards the socket's, so push sessions on it are polled
// instead of each reading on a goroutine of its own (push.SyscallConn).
func (c *slotConn) SyscallConn() (syscall.RawConn, error) { return push.SyscallConn(c.Conn) }

// routeClass sorts requests by the listener that serves them.
type routeClass int

const (
	classHealth routeClass = iota // /healthz, /readyz: every listener
	classPush                     // push.Handles: --push-listen
	classAdmin                    // everything else (/v1, /ui, /portal, /metrics, …): --admin-listen
)

func classify(r *http.Request) routeClass {
	switch {
	case r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
		return classHealth
	case push.Handles(r):
		return classPush
	}
	return classAdmin
}

// serveOnly passes the requests of the classes in serve to next and
// answers the others 404, as routes that do not exist here.
func serveOnly(next http.Handler, serve ...routeClass) http.Handler {
	ok := map[routeClass]bool{classHealth: true}
	for _, c := range serve {
		ok[c] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok[classify(r)] {
			httpapi.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// newHTTPServer serves h with the read deadlines every public listener
// has: headers within --read-timeout, then the body within --read-timeout
// (httpapi.ReadDeadline; WebSocket sessions lift it when they upgrade).
func newHTTPServer(c *config, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           httpapi.ReadDeadline(h, c.ReadTimeout),
		ReadHeaderTimeout: c.ReadTimeout,
		IdleTimeout:       120 * time.Second,
	}
}

// nodeListeners are a node's public listeners, wrapped in their
// connection limits: --listen and --push-listen share --max-conns,
// --admin-listen has --admin-max-conns of its own.
type nodeListeners struct {
	main, push, admin net.Listener // push, admin: nil when not set
}

func listenAll(c *config, l connLimits) (*nodeListeners, error) {
	public := make(connSlots, l.public)
	lns := &nodeListeners{}
	for _, x := range []struct {
		flag, addr string
		dst        *net.Listener
		slots      connSlots
	}{
		{"--listen", c.Listen, &lns.main, public},
		{"--push-listen", c.PushListen, &lns.push, public},
		{"--admin-listen", c.AdminListen, &lns.admin, make(connSlots, max(l.admin, 1))},
	} {
		if x.addr == "" && x.dst != &lns.main {
			continue
		}
		ln, err := net.Listen("tcp", x.addr)
		if err != nil {
			lns.close()
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("error listening on %s (%s): %w (is another herald running? choose a free address with %s, e.g. %s 127.0.0.1:8081)", x.addr, x.flag, err, x.flag, x.flag)
			}
			return nil, fmt.Errorf("error listening on %s (%s): %w", x.addr, x.flag, err)
		}
		*x.dst = newLimitListener(ln, x.slots)
	}
	return lns, nil
}

// api is the listener of the /v1 API: --admin-listen, else --listen.
func (lns *nodeListeners) api() net.Listener {
	if lns.admin != nil {
		return lns.admin
	}
	return lns.main
}

// pushLn is the listener push endpoints are built on by default.
func (lns *nodeListeners) pushLn() net.Listener {
	if lns.push != nil {
		return lns.push
	}
	return lns.main
}

func (lns *nodeListeners) addr(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

func (lns *nodeListeners) close() {
	for _, ln := range []net.Listener{lns.main, lns.push, lns.admin} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// servedListener pairs a server with the listener it serves.
type servedListener struct {
	srv *http.Server
	ln  net.Listener
}
