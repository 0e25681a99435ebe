//go:build linux

package push

// This file holds the epoll poller: sockets are registered one-shot for
// readability, so a readable socket is handed to the worker pool once and
// not again until its session asks (after reading what was there).

import (
	"errors"
	"io"
	"sync"

	"golang.org/x/sys/unix"
)

// poller is a set of epoll instances, each waited on by one goroutine, and
// the table of polled sessions by socket file descriptor.
type poller struct {
	eps []int
	mu  sync.RWMutex
	fds []*conn // by file descriptor
}

// newPoller starts n epoll instances; nil when epoll cannot be created
// (sessions then read on a goroutine each).
func newPoller(n int) *poller {
	p := &poller{}
	for range n {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			break
		}
		p.eps = append(p.eps, ep)
		go p.wait(ep)
	}
	if len(p.eps) == 0 {
		return nil
	}
	return p
}

func (p *poller) wait(ep int) {
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err != nil {
			// EINTR (the runtime's preemption signal); nothing else is
			// expected of a valid epoll descriptor.
			continue
		}
		p.mu.RLock()
		for _, ev := range events[:n] {
			if fd := int(ev.Fd); fd < len(p.fds) {
				if c := p.fds[fd]; c != nil {
					c.schedule(evRead)
				}
			}
		}
		p.mu.RUnlock()
	}
}

// pollFD is how a session reads a socket the poller watches.
// The descriptor is read directly: only the session's run reads it, and
// only its end closes the socket, so no read can meet a reused descriptor.
type pollFD struct {
	fd    int32
	ep    int32
	added bool
}

// attach makes c's socket polled when it has a file descriptor; false
// when it has none.
func (p *poller) attach(c *conn) bool {
	rc, err := SyscallConn(c.nc)
	if err != nil {
		return false
	}
	fd := -1
	if err := rc.Control(func(s uintptr) { fd = int(s) }); err != nil || fd < 0 {
		return false
	}
	// Set before c is in the table: a stale event for the descriptor's
	// previous socket may schedule c at once.
	c.pfd = pollFD{fd: int32(fd), ep: int32(p.eps[fd%len(p.eps)])}
	p.mu.Lock()
	if fd >= len(p.fds) {
		grown := make([]*conn, max(fd+1, 2*len(p.fds), 1024))
		copy(grown, p.fds)
		p.fds = grown
	}
	p.fds[fd] = c
	p.mu.Unlock()
	return true
}

// arm asks for one readability event of c's socket.
func (p *poller) arm(c *conn) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: c.pfd.fd}
	op := unix.EPOLL_CTL_MOD
	if !c.pfd.added {
		op = unix.EPOLL_CTL_ADD
	}
	if err := unix.EpollCtl(int(c.pfd.ep), op, int(c.pfd.fd), &ev); err != nil {
		return err
	}
	c.pfd.added = true
	return nil
}

// read reads what c's socket holds without waiting: (0, nil) when
// nothing, io.EOF when the peer closed.
func (p *poller) read(c *conn, b []byte) (int, error) {
	n, rerr := unix.Read(int(c.pfd.fd), b)
	for rerr == unix.EINTR {
		n, rerr = unix.Read(int(c.pfd.fd), b)
	}
	switch {
	case errors.Is(rerr, unix.EAGAIN):
		return 0, nil
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// detach stops polling c's socket; the caller closes it afterwards.
func (p *poller) detach(c *conn) {
	if c.pfd.added {
		_ = unix.EpollCtl(int(c.pfd.ep), unix.EPOLL_CTL_DEL, int(c.pfd.fd), nil)
	}
	p.mu.Lock()
	if int(c.pfd.fd) < len(p.fds) && p.fds[c.pfd.fd] == c {
		p.fds[c.pfd.fd] = nil
	}
	p.mu.Unlock()
}
