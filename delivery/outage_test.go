package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store/postgres"
	"github.com/heraldhq/herald/webhook"
)

// tcpProxy forwards a loopback port to PostgreSQL; cut drops every
// connection and refuses new ones until restore, like a database outage.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) restore() {
	var ln net.Listener
	require.Eventually(p.t, func() bool {
		var err error
		ln, err = net.Listen("tcp", p.addr)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "could not listen on %s again", p.addr)
	p.serve(ln)
}

// TestStoreOutageLosesNothing cuts PostgreSQL away from a running node
// mid-delivery, keeps publishing through the outage (those publishes fail
// and are not acknowledged), restores it, and proves every acknowledged
// event reaches the receiver.
func TestStoreOutageLosesNothing(t *testing.T) {
	t.Parallel()
	schema := testdb.PostgresSchema(t)
	u, err := url.Parse(testdb.URL())
	require.NoError(t, err)
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.addr
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Config{URL: u.String(), Schema: schema, MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(ctx))

	var mu sync.Mutex
	received := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&ev)
		select { // slow enough that the cut lands mid-delivery
		case <-time.After(5 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		mu.Lock()
		received[ev.ID]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(recv.Close)
	createSub(t, s, recv.URL, time.Second, nil, webhook.NewSecret())

	// Wired as herald serve does, direct dispatch included: deliveries
	// leased at insert must survive the outage too.
	fanout := ingest.NewFanout(s, nil)
	engine := delivery.New(delivery.Config{
		Store:        s,
		Sender:       webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
		Fanout:       fanout,
		Tiers:        delivery.Tiers{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
		Workers:      8,
		LeaseMargin:  time.Second,
		PollInterval: 50 * time.Millisecond,
	})
	ing := ingest.New(ingest.Config{Store: s, Fanout: fanout, OnCommit: engine.Notify, Dispatcher: engine})
	ing.Start()
	engine.Start()
	t.Cleanup(func() { ing.Close(); engine.Stop() })

	var acked []string
	var failed int
	publish := func(n int) {
		for i := 0; i < n; i++ {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			res, err := ing.PublishOne(pctx, &herald.Event{Type: "outage.test", Data: json.RawMessage(`{}`)})
			cancel()
			if err != nil {
				t.Logf("publish refused: %v", err)
				failed++
				continue
			}
			acked = append(acked, res.ID)
		}
	}
	publish(100)
	proxy.cut()
	publish(5) // during the outage: refused, not acknowledged
	proxy.restore()
	publish(100)

	require.GreaterOrEqual(t, len(acked), 200, "publishes outside the outage are acknowledged")
	t.Logf("acknowledged %d, refused during the outage %d", len(acked), failed)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range acked {
			if received[id] == 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "an acknowledged event was lost across the outage")
}
