package push

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// trickle writes b to c's socket one byte every interval, from a
// goroutine of the test, until the socket fails or b is written.
func trickle(c *client, b []byte, interval time.Duration) {
	nc := c.ws.NetConn()
	go func() {
		for i := range b {
			if _, err := nc.Write(b[i : i+1]); err != nil {
				return
			}
			time.Sleep(interval)
		}
	}()
}

// TestIdleAndSlowlorisSessionsHoldNoGoroutine (ADR 0027): an idle session
// has no goroutine on the node, and neither has a client that trickles a
// frame in one byte a second; that client is closed at the frame deadline
// (HandshakeTimeout after the frame's first byte), as one trickling its
// hello is at the handshake deadline. Not parallel: it counts the
// process's goroutines.
func TestIdleAndSlowlorisSessionsHoldNoGoroutine(t *testing.T) {
	const deadline = 2 * time.Second
	e := setup(t, func(c *Config) { c.HandshakeTimeout = deadline })
	warm := e.dial(t)
	warm.hello("", nil)
	warm.sync()
	base := runtime.NumGoroutine()
	const n = 100
	for range n {
		c := e.dial(t)
		c.hello("", nil)
	}
	// The upgrades' net/http goroutines end once the sockets are handed
	// over; a session's own would stay.
	settled := func() bool { return runtime.NumGoroutine()-base < n/4 }
	require.Eventually(t, settled, 10*time.Second, 10*time.Millisecond,
		"%d idle sessions: %d goroutines more", n, runtime.NumGoroutine()-base)

	slow := e.dial(t)
	slow.hello("", nil)
	frame := clientFrame(true, opText, []byte(`{"messageType":"ping"}`))
	start := time.Now()
	trickle(slow, frame, time.Second)
	hello := e.dial(t)
	helloStart := time.Now()
	trickle(hello, clientFrame(true, opText, []byte(`{"messageType":"hello"}`)), time.Second)

	time.Sleep(deadline / 2) // both are mid-frame
	require.Eventually(t, settled, 10*time.Second, 10*time.Millisecond,
		"trickling clients: %d goroutines more", runtime.NumGoroutine()-base)

	slow.expectClose(closeError)
	require.GreaterOrEqual(t, time.Since(start), deadline, "closed before the frame deadline")
	hello.expectClose(closeError)
	require.GreaterOrEqual(t, time.Since(helloStart), deadline, "closed before the handshake deadline")
	// The idle ones are still served.
	warm.sync()
}

// TestThousandClientsAtOnce (ADR 0027): 1,000 clients connecting at the
// same moment are all upgraded and answered hello; the worker pool queues
// what it cannot run at once and loses nothing.
func TestThousandClientsAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.HandshakeTimeout = 60 * time.Second })
	const n = 1000
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		conns []*websocket.Conn
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	go1 := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go1
			d := websocket.Dialer{HandshakeTimeout: 60 * time.Second}
			ws, _, err := d.Dial(e.url, nil)
			if err != nil {
				fail(fmt.Errorf("client %d: dial: %w", i, err))
				return
			}
			mu.Lock()
			conns = append(conns, ws)
			mu.Unlock()
			if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"messageType":"hello","use_webpush":true}`)); err != nil {
				fail(fmt.Errorf("client %d: hello: %w", i, err))
				return
			}
			_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, data, err := ws.ReadMessage()
			if err != nil {
				fail(fmt.Errorf("client %d: reply: %w", i, err))
				return
			}
			var r struct {
				MessageType string `json:"messageType"`
				Status      int    `json:"status"`
			}
			if err := json.Unmarshal(data, &r); err != nil || r.MessageType != msgHello || r.Status != 200 {
				fail(fmt.Errorf("client %d: reply %s", i, data))
			}
		}()
	}
	close(go1)
	wg.Wait()
	t.Cleanup(func() {
		for _, ws := range conns {
			_ = ws.Close()
		}
	})
	require.Empty(t, errs)
	require.Len(t, conns, n)
	require.Equal(t, n, e.h.Connected())
}
