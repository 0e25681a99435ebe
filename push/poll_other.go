//go:build !linux

package push

// Without epoll every session reads on a goroutine of its own
// (blockingReader); the rest of ADR 0027 (timers, worker pool, no read
// buffer between frames) is the same.

type poller struct{}

type pollFD struct{}

func newPoller(int) *poller { return nil }

func (p *poller) attach(*conn) bool               { return false }
func (p *poller) arm(*conn) error                 { return nil }
func (p *poller) read(*conn, []byte) (int, error) { return 0, nil }
func (p *poller) detach(*conn)                    {}
