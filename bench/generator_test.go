package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeNode is the part of herald's API the generator uses: subscriptions,
// single and batch publishes, stats and /metrics. Each publish is delivered
// at once to every subscription of its type, from a goroutine.
type fakeNode struct {
	t       *testing.T
	mu      sync.Mutex
	subs    map[string]fakeSub
	deleted []string
	pending atomic.Int64
	cpu     atomic.Int64 // process_cpu_seconds_total, in ms: grows per publish
	wg      sync.WaitGroup
}

type fakeSub struct{ url, eventType string }

func newFakeNode(t *testing.T) (*fakeNode, *httptest.Server) {
	n := &fakeNode{t: t, subs: map[string]fakeSub{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/subscriptions", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			URL        string   `json:"url"`
			EventTypes []string `json:"event_types"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&in))
		n.mu.Lock()
		id := fmt.Sprintf("sub_%d", len(n.subs))
		n.subs[id] = fakeSub{url: in.URL, eventType: in.EventTypes[0]}
		n.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%q}`, id)
	})
	mux.HandleFunc("DELETE /v1/subscriptions/{id}", func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.deleted = append(n.deleted, r.PathValue("id"))
		n.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/events", func(w http.ResponseWriter, r *http.Request) {
		var ev json.RawMessage
		require.NoError(t, json.NewDecoder(r.Body).Decode(&ev))
		w.WriteHeader(http.StatusAccepted)
		_, _ = fmt.Fprintf(w, `{"id":"evt","deliveries":%d}`, n.publish(ev))
	})
	mux.HandleFunc("POST /v1/events/batch", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Events []json.RawMessage `json:"events"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&in))
		var items []string
		for i, ev := range in.Events {
			items = append(items, fmt.Sprintf(`{"index":%d,"status":"accepted","deliveries":%d}`, i, n.publish(ev)))
		}
		_, _ = fmt.Fprintf(w, `{"results":[%s]}`, strings.Join(items, ","))
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, `{"tiers":[{"tier":0,"pending":%d,"in_flight":0}],"dead":0}`, n.pending.Load())
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\nherald_direct_dispatch_total 7\n",
			float64(n.cpu.Load())/1000)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); n.wg.Wait() })
	return n, srv
}

// publish delivers ev to every subscription of its type and returns how
// many there are.
func (n *fakeNode) publish(ev json.RawMessage) int {
	var e struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	require.NoError(n.t, json.Unmarshal(ev, &e))
	n.cpu.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, s := range n.subs {
		if s.eventType != e.Type {
			continue
		}
		k++
		n.pending.Add(1)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer n.pending.Add(-1)
			body := fmt.Sprintf(`{"id":"evt","type":%q,"data":%s}`, e.Type, e.Data)
			if resp, err := http.Post(s.url, "application/json", bytes.NewReader([]byte(body))); err == nil {
				_ = resp.Body.Close()
			}
		}()
	}
	return k
}

func TestRunAgainstAFakeNode(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{0, 25} {
		t.Run(fmt.Sprintf("Batch%d", batch), func(t *testing.T) {
			t.Parallel()
			node, srv := newFakeNode(t)
			cfg := Config{Count: 100, Payload: 256, Concurrency: 4, Batch: batch, Fanout: 2, Wait: 10 * time.Second, CeilingMax: 200 * time.Millisecond}
			started, stopped := false, false
			res, err := Run(t.Context(), cfg, func(context.Context) (Node, func(), error) {
				started = true
				return Node{URL: srv.URL, Token: "tok", Remote: true}, func() { stopped = true }, nil
			})
			require.NoError(t, err)
			require.True(t, started)
			require.True(t, stopped)
			require.EqualValues(t, 100, res.Published)
			require.EqualValues(t, 200, res.DeliveriesWanted)
			require.EqualValues(t, 200, res.Delivered)
			require.True(t, res.Complete)
			require.Positive(t, res.LatencyP50Ms)
			require.Positive(t, res.Ceiling.Requests)
			require.EqualValues(t, 7, res.DirectDispatched, "read from /metrics")
			require.Equal(t, "node", res.CPUScope, "a remote node's CPU is its own")
			require.InDelta(t, 500.0, res.CPUPerDeliveryUs, 1, "1 ms of CPU per publish, 2 deliveries each: 500 µs per delivery")
			if batch > 0 {
				require.Equal(t, "batch", res.Mode)
			}
			node.mu.Lock()
			defer node.mu.Unlock()
			require.ElementsMatch(t, []string{"sub_0", "sub_1"}, node.deleted, "a remote node's bench subscriptions are deleted")
		})
	}
}

func TestRunReportsPublishErrors(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/subscriptions", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"sub_0"}`))
	})
	mux.HandleFunc("POST /v1/events", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":{"code":"forbidden","message":"token lacks events:publish"}}`))
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"tiers":[],"dead":0}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	res, err := Run(t.Context(), Config{Count: 10, Concurrency: 2, Fanout: 1, Wait: time.Second}, func(context.Context) (Node, func(), error) {
		return Node{URL: srv.URL, Token: "tok"}, func() {}, nil
	})
	require.NoError(t, err)
	require.Zero(t, res.Published)
	require.EqualValues(t, 10, res.PublishErrors)
	require.Equal(t, "forbidden: token lacks events:publish", res.FirstPublishError)
	require.Zero(t, res.CPUPerDeliveryUs, "no /metrics, no CPU figure")
}
