package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// countingObserver counts claims and direct starts.
type countingObserver struct {
	delivery.NopObserver
	direct atomic.Int64
	claims atomic.Int64
}

func (o *countingObserver) ObserveDirect(n int) { o.direct.Add(int64(n)) }
func (o *countingObserver) ObserveClaim(int)    { o.claims.Add(1) }

// gate is a receiver that counts concurrent requests and can hold them.
type gate struct {
	srv      *httptest.Server
	mu       sync.Mutex
	open     chan struct{} // requests wait until it is closed (nil: answer at once)
	running  int
	most     int
	received map[string]int // event id -> requests
}

func newGate(t *testing.T, held bool) *gate {
	g := &gate{received: map[string]int{}}
	if held {
		g.open = make(chan struct{})
	}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			ID string `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&ev)
		g.mu.Lock()
		g.running++
		g.most = max(g.most, g.running)
		g.received[ev.ID]++
		open := g.open
		g.mu.Unlock()
		if open != nil {
			select {
			case <-open:
			case <-r.Context().Done():
			}
		}
		time.Sleep(time.Millisecond) // keep requests overlapping; not a wait for async work
		g.mu.Lock()
		g.running--
		g.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
}

func (g *gate) stats() (running, most, distinct int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, g.most, len(g.received)
}

type directHarness struct {
	ing    *ingest.Ingester
	engine *delivery.Engine
	obs    *countingObserver
}

func setupDirect(t *testing.T, s store.Store, workers int) *directHarness {
	t.Helper()
	obs := &countingObserver{}
	fanout := ingest.NewFanout(s, nil)
	engine := delivery.New(delivery.Config{
		Store:  s,
		Sender: webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
		Fanout: fanout,
		// One tier: every worker serves tier 0, so the cap under test is
		// exactly Workers.
		Tiers:       delivery.Tiers{0},
		Workers:     workers,
		LeaseMargin: 5 * time.Second,
		// No periodic claims: after the first, the loop claims only when
		// notified, so what the tests count is deterministic.
		PollInterval:      time.Hour,
		RebalanceInterval: time.Hour,
		Observer:          obs,
	})
	ing := ingest.New(ingest.Config{Store: s, Fanout: fanout, OnCommit: engine.Notify, Dispatcher: engine})
	ing.Start()
	engine.Start()
	t.Cleanup(func() {
		ing.Close()
		engine.Stop()
	})
	return &directHarness{ing: ing, engine: engine, obs: obs}
}

// waitDrained waits until the engine grants a direct-dispatch reservation,
// and gives it back.
func (h *directHarness) waitDrained(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		if h.engine.DispatchReserve(1) == 1 {
			h.engine.DispatchCancel(1)
			return true
		}
		return false
	}, 10*time.Second, time.Millisecond)
}

// An idle engine sends fresh deliveries without claiming them, and the
// store records them as delivered with their attempt.
func TestDirectDispatchIdleEngine(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		g := newGate(t, false)
		sub := createSub(t, s, g.srv.URL, 5*time.Second, []string{"direct.*"}, webhook.NewSecret())
		h := setupDirect(t, s, 4)

		// The tier is drained once the loop's first claim found nothing.
		h.waitDrained(t)
		const n = 30
		for i := 0; i < n; i++ {
			// One at a time, each after the previous request ended, so a
			// slot is always free.
			require.Eventually(t, func() bool { return h.engine.Inflight() == 0 }, 10*time.Second, time.Millisecond)
			_, err := h.ing.PublishOne(context.Background(), &herald.Event{Type: "direct.test", Data: json.RawMessage(`{}`)})
			require.NoError(t, err)
		}
		got := finished(t, s, sub.ID, n)
		for _, d := range got {
			require.Equal(t, herald.DeliveryDelivered, d.State)
			require.Equal(t, 1, d.AttemptCount)
		}
		require.EqualValues(t, n, h.obs.direct.Load(), "an idle engine claims none of them")
		_, _, distinct := g.stats()
		require.Equal(t, n, distinct)
	})
}

// With a backlog the workers cannot clear, fresh work is not dispatched
// directly (it would overtake the backlog), and the worker count caps
// concurrent requests across claims and direct dispatch.
func TestDirectDispatchBacklogAndCap(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		const workers = 4
		g := newGate(t, true)
		sub := createSub(t, s, g.srv.URL, 30*time.Second, []string{"direct.*"}, webhook.NewSecret())
		h := setupDirect(t, s, workers)
		h.waitDrained(t)

		// Publish more than the workers can hold from 8 publishers at once.
		const n = 40
		var wg sync.WaitGroup
		for p := 0; p < 8; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n/8; i++ {
					_, err := h.ing.PublishOne(context.Background(), &herald.Event{Type: "direct.test", Data: json.RawMessage(`{}`)})
					require.NoError(t, err)
				}
			}()
		}
		wg.Wait()
		require.Eventually(t, func() bool {
			running, _, _ := g.stats()
			return running == workers
		}, 10*time.Second, 5*time.Millisecond)
		require.Zero(t, h.engine.DispatchReserve(1), "every slot is busy")

		// Free the receiver: everything is delivered, never more than
		// workers at once, and the backlog went through claims.
		g.release()
		finished(t, s, sub.ID, n)
		_, most, distinct := g.stats()
		require.Equal(t, n, distinct)
		require.LessOrEqual(t, most, workers, "direct dispatch and claims share the worker cap")
		require.Less(t, h.obs.direct.Load(), int64(n), "the backlog was claimed, not dispatched directly")

		h.waitDrained(t) // and a reservation can be given back
	})
}

// A pending backlog (work stored before the engine ran) blocks direct
// dispatch until the engine has claimed it.
func TestDirectDispatchWaitsForBacklog(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		g := newGate(t, true)
		sub := createSub(t, s, g.srv.URL, 30*time.Second, []string{"direct.*"}, webhook.NewSecret())
		pre := setupIngestOnly(t, s)
		const backlog = 12
		for i := 0; i < backlog; i++ {
			_, err := pre.PublishOne(context.Background(), &herald.Event{Type: "direct.test", Data: json.RawMessage(`{}`)})
			require.NoError(t, err)
		}
		h := setupDirect(t, s, 4)
		require.Eventually(t, func() bool {
			running, _, _ := g.stats()
			return running == 4
		}, 10*time.Second, 5*time.Millisecond)
		_, err := h.ing.PublishOne(context.Background(), &herald.Event{Type: "direct.test", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.Zero(t, h.obs.direct.Load(), "fresh work does not overtake the backlog")
		g.release()
		finished(t, s, sub.ID, backlog+1)
	})
}

// After Stop, nothing is reserved.
func TestDirectDispatchAfterStop(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	h := setupDirect(t, s, 4)
	h.waitDrained(t)
	h.engine.Stop()
	require.Zero(t, h.engine.DispatchReserve(1))
}
