package desttest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// HoldingServer is a TCP server that accepts connections and never
// answers: a broker that hangs (in its handshake or on a publish).
type HoldingServer struct {
	// Addr is its host:port.
	Addr string
	// Accepted receives one value per accepted connection (dropped while
	// 16 wait unread).
	Accepted chan struct{}

	release func()
}

// NewHoldingServer starts a HoldingServer; it stops at Release or at the
// end of the test.
func NewHoldingServer(t *testing.T) *HoldingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &HoldingServer{Addr: ln.Addr().String(), Accepted: make(chan struct{}, 16)}
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	s.release = func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}
	t.Cleanup(s.release)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			select {
			case s.Accepted <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

// Release stops listening and closes the connections it holds: the
// clients see the server go away.
func (s *HoldingServer) Release() { s.release() }

// RefusedAddr returns a local host:port nothing listens on: a dial is
// refused.
func RefusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// Collector reads a Consumer on its own goroutine until ctx ends.
type Collector struct {
	mu   sync.Mutex
	msgs []*Received
}

// Collect starts a Collector of c.
func Collect(ctx context.Context, c Consumer) *Collector {
	col := &Collector{}
	go func() {
		for {
			m, err := c.Next(ctx)
			if err != nil {
				return
			}
			col.mu.Lock()
			col.msgs = append(col.msgs, m)
			col.mu.Unlock()
		}
	}()
	return col
}

// Received returns the messages read so far.
func (c *Collector) Received() []*Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Received(nil), c.msgs...)
}

// AwaitDistinct waits until the messages read hold want distinct
// webhook-ids, and returns them all (duplicates included).
func (c *Collector) AwaitDistinct(t *testing.T, want int, within time.Duration) []*Received {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		msgs := c.Received()
		distinct, _ := Distinct(msgs)
		if distinct == want {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("every delivered event reaches the consumer: %d distinct of %d after %s (%d messages)",
				distinct, want, within, len(msgs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
