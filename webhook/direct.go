package webhook

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// The direct path (ADR 0017) sends plain-http webhooks as HTTP/1.1 on the
// attempting goroutine: it writes the request and reads the response on a
// pooled connection itself, where net/http's Transport hands every request
// to a per-connection write goroutine and every response back from a read
// goroutine. Those hand-offs, their scheduler work and allocations were
// about a tenth of the node's CPU per delivery (docs/benchmarks.md, issue
// 13). https stays on the Transport: it negotiates HTTP/2 and owns TLS.
//
// What the Transport (and http.Client) did that this keeps: the Guard (the
// same dialer), no proxy, URL credentials as Basic auth, no redirects (the
// caller reads the 3xx), the response header cap,
// 1xx responses skipped, keep-alive only for a response read to its end
// without "Connection: close", a per-host idle cap and idle timeout, and a
// kept-alive connection the receiver closed while idle is not used (the
// Transport notices with its read goroutine; this path peeks at the socket
// before reusing it).

const (
	// directBufSize is each connection's read and write buffer: a signed
	// 1 KiB event and its headers fit in one write.
	directBufSize = 4 << 10
	// directIdleTimeout closes a connection idle this long, as the
	// Transport's IdleConnTimeout does.
	directIdleTimeout = 90 * time.Second
)

// maxBodyWireBytes caps the bytes read from the connection for one
// response body: 16 times what the caller reads of it, for chunk framing.
const maxBodyWireBytes = 16 * herald.ResponseReadLimit

// max1xx is how many interim (1xx) answers one request may get before the
// final one, as in net/http's Transport.
const max1xx = 5

var (
	// errHeadersTooLarge ends a response whose headers pass
	// maxResponseHeaderBytes.
	errHeadersTooLarge = fmt.Errorf("response headers exceeded %d bytes", maxResponseHeaderBytes)
	errTooMany1xx      = fmt.Errorf("more than %d interim (1xx) responses", max1xx)
)

// aLongTimeAgo is a deadline in the past: it fails any blocked read or
// write at once.
var aLongTimeAgo = time.Unix(1, 0)

// directPool is the direct path's connection pool.
type directPool struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int           // per host
	idleTimeout time.Duration // directIdleTimeout; tests shorten it

	mu    sync.Mutex
	idle  map[string][]*directConn // by host:port, most recently used last
	sweep *time.Timer              // runs while any connection is idle
}

// directConn is one pooled connection.
type directConn struct {
	nc     net.Conn
	lim    limitedConn
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
}

// limitedConn reads from the connection at most n more bytes, then fails
// with err: the response's headers, then its body, each get a budget.
type limitedConn struct {
	nc  net.Conn
	n   int64
	err error
}

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, l.err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.nc.Read(p)
	l.n -= int64(n)
	return n, err
}

func (l *limitedConn) budget(n int64, err error) { l.n, l.err = n, err }

// roundTrip sends req and returns its response with the headers read. The
// caller reads the body and must close it: a body read to its end returns
// the connection to the pool. ctx bounds and cancels the whole exchange,
// body included.
func (p *directPool) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	addr := net.JoinHostPort(req.URL.Hostname(), port)
	// Credentials in the URL become Basic auth, as http.Client does;
	// Request.Write alone would drop them.
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		password, _ := u.Password()
		req.SetBasicAuth(u.Username(), password)
	}
	for retried := false; ; retried = true {
		c, reused, err := p.get(ctx, addr)
		if err != nil {
			return nil, err
		}
		if retried && req.GetBody != nil {
			// The first Write consumed the body.
			if req.Body, err = req.GetBody(); err != nil {
				_ = c.nc.Close()
				return nil, err
			}
		}
		resp, err := p.exchange(ctx, req, addr, c)
		// A reused connection that could not even take the request was
		// closed under us: nothing reached the receiver, so one more try
		// on a fresh connection cannot duplicate the delivery. Any later
		// failure is returned, as the Transport does for a POST.
		var nw nothingWritten
		if err != nil && reused && !retried && errors.As(err, &nw) && ctx.Err() == nil {
			continue
		}
		return resp, err
	}
}

// nothingWritten marks a failure before any byte of the request left.
type nothingWritten struct{ error }

func (e nothingWritten) Unwrap() error { return e.error }

func (p *directPool) exchange(ctx context.Context, req *http.Request, addr string, c *directConn) (*http.Response, error) {
	// Cancellation and the attempt's deadline reach blocked I/O through
	// the connection's deadline; classifyError then reads the cause from
	// ctx, as with the Transport.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.nc.Close()
		return nil, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(err)
	}
	if n := c.bw.Buffered(); n > 0 {
		if err := c.bw.Flush(); err != nil {
			if c.bw.Buffered() == n {
				err = nothingWritten{err}
			}
			return fail(err)
		}
	}
	var resp *http.Response
	for interim := 0; ; interim++ {
		if interim > max1xx {
			return fail(errTooMany1xx)
		}
		c.lim.budget(maxResponseHeaderBytes, errHeadersTooLarge)
		r, err := http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err)
		}
		// 1xx are interim (103 Early Hints, a stray 100 Continue): the
		// answer follows. 101 would switch protocols; it is returned and
		// the connection not reused.
		if r.StatusCode >= 100 && r.StatusCode < 200 && r.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		resp = r
		break
	}
	// The caller reads at most ResponseReadLimit of body; the budget
	// leaves room for chunk framing around it (the timeout bounds the rest,
	// as with the Transport, which has no such cap).
	c.lim.budget(maxBodyWireBytes, io.ErrUnexpectedEOF)
	keep := !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	resp.Body = &directBody{body: resp.Body, done: func(eof bool) {
		if stop() && eof && keep && c.br.Buffered() == 0 {
			_ = c.nc.SetDeadline(time.Time{})
			p.put(addr, c)
			return
		}
		_ = c.nc.Close()
	}}
	return resp, nil
}

// directBody notes whether the body was read to its end and hands the
// connection back when closed.
type directBody struct {
	body   io.ReadCloser
	eof    bool
	closed bool
	done   func(eof bool)
}

func (b *directBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *directBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.done(b.eof)
	return nil
}

// get returns an idle connection to addr (reused true) or dials one.
func (p *directPool) get(ctx context.Context, addr string) (*directConn, bool, error) {
	now := time.Now()
	for {
		p.mu.Lock()
		list := p.idle[addr]
		if len(list) == 0 {
			p.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		p.idle[addr] = list[:len(list)-1]
		p.mu.Unlock()
		if now.Sub(c.idleAt) < p.idleTimeout && alive(c.nc) {
			return c, true, nil
		}
		_ = c.nc.Close()
	}
	nc, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	c := &directConn{nc: nc}
	c.lim.nc = nc
	c.br = bufio.NewReaderSize(&c.lim, directBufSize)
	c.bw = bufio.NewWriterSize(nc, directBufSize)
	return c, false, nil
}

// put pools an idle connection, or closes it when addr has maxIdle already.
func (p *directPool) put(addr string, c *directConn) {
	c.idleAt = time.Now()
	p.mu.Lock()
	if p.idle == nil {
		p.idle = map[string][]*directConn{}
	}
	if len(p.idle[addr]) >= p.maxIdle {
		p.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	p.idle[addr] = append(p.idle[addr], c)
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTimeout/2, p.sweepIdle)
	}
	p.mu.Unlock()
}

// sweepIdle closes connections idle past the idle timeout, so a receiver
// herald stopped sending to does not keep sockets open; it reschedules
// itself while any connection is idle.
func (p *directPool) sweepIdle() {
	now := time.Now()
	var stale []*directConn
	p.mu.Lock()
	for addr, list := range p.idle {
		keep := list[:0]
		for _, c := range list {
			if now.Sub(c.idleAt) >= p.idleTimeout {
				stale = append(stale, c)
			} else {
				keep = append(keep, c)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(p.idle, addr)
		} else {
			p.idle[addr] = keep
		}
	}
	if len(p.idle) > 0 {
		p.sweep.Reset(p.idleTimeout / 2)
	} else {
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, c := range stale {
		_ = c.nc.Close()
	}
}

// closeIdle closes every idle connection.
func (p *directPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			_ = c.nc.Close()
		}
	}
}
