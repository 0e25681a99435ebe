package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// A subscription with a large backlog does not delay a second
// subscription's single delivery by more than a few claim rounds.
func TestFairnessAcrossSubscriptions(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		var busyBeforeQuiet, busyTotal atomic.Int64
		var quietAt atomic.Int64
		quietAt.Store(-1)
		busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			busyTotal.Add(1)
			if quietAt.Load() < 0 {
				busyBeforeQuiet.Add(1)
			}
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(busy.Close)
		quiet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			quietAt.CompareAndSwap(-1, busyTotal.Load())
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(quiet.Close)
		busySub := createSub(t, s, busy.URL, time.Second, []string{"busy.*"}, webhook.NewSecret())
		createSub(t, s, quiet.URL, time.Second, []string{"quiet.*"}, webhook.NewSecret())

		// Backlog first, engine not yet running.
		ingOnly := setupIngestOnly(t, s)
		const backlog = 3000
		evs := make([]*herald.Event, backlog)
		for i := range evs {
			evs[i] = &herald.Event{Type: "busy.thing", Data: json.RawMessage(`{}`)}
		}
		_, err := ingOnly.PublishMany(context.Background(), evs)
		require.NoError(t, err)

		const workers = 4
		h := setupWorkers(t, s, delivery.Tiers{0, time.Second}, workers)
		// Let the busy subscription get going, then publish the quiet event.
		require.Eventually(t, func() bool { return busyTotal.Load() >= 20 }, 30*time.Second, time.Millisecond)
		_, err = h.ing.PublishOne(context.Background(), &herald.Event{Type: "quiet.thing", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return quietAt.Load() >= 0 }, 30*time.Second, time.Millisecond)
		waited := quietAt.Load() - 20
		t.Logf("busy deliveries made between the quiet publish and its delivery: at most %d (backlog %d)", waited, backlog)
		// A few claim rounds of `workers` slots each, nowhere near the backlog.
		require.Less(t, quietAt.Load(), int64(20+20*workers))
		res, err := s.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: busySub.ID, State: herald.DeliveryPending, Limit: 1})
		require.NoError(t, err)
		require.NotEmpty(t, res.Deliveries, "the busy backlog was still pending when the quiet delivery went out")
	})
}

// A delivery leased by a node that died is rescued when its lease expires
// and delivered by a live node.
func TestLeaseRescue(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		var got atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got.Add(1)
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(srv.Close)
		sub := createSub(t, s, srv.URL, 100*time.Millisecond, nil, webhook.NewSecret())
		ing := setupIngestOnly(t, s)
		res, err := ing.PublishOne(context.Background(), &herald.Event{Type: "a.b", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.Equal(t, 1, res.DeliveryCount)

		// The "dead node" claims and never completes.
		now := time.Now().UTC().Truncate(time.Millisecond)
		claimed, err := s.DeliveryClaim(context.Background(), &store.DeliveryClaimParams{
			Tier: 0, Limit: 10, Now: now, LeaseOwner: "dead-node",
			LeaseUntil: now.Add(200 * time.Millisecond), LeaseMargin: 100 * time.Millisecond,
		})
		require.NoError(t, err)
		require.Len(t, claimed, 1)

		setupWorkers(t, s, delivery.Tiers{0}, 2)
		require.Eventually(t, func() bool { return got.Load() == 1 }, 30*time.Second, 5*time.Millisecond)
		d := finished(t, s, sub.ID, 1)
		for _, x := range d {
			require.Equal(t, herald.DeliveryDelivered, x.State)
		}
	})
}

// Stop releases deliveries whose requests are still running after the
// shutdown timeout, without recording an attempt.
func TestShutdownReleases(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		entered := make(chan struct{}, 1)
		unblock := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			select {
			case <-unblock:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(func() { close(unblock); srv.Close() })
		sub := createSub(t, s, srv.URL, 30*time.Second, nil, webhook.NewSecret())
		ing := setupIngestOnly(t, s)

		engine := delivery.New(delivery.Config{
			Store:           s,
			Sender:          webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
			Tiers:           delivery.Tiers{0, time.Second},
			Workers:         2,
			PollInterval:    20 * time.Millisecond,
			ShutdownTimeout: 50 * time.Millisecond,
		})
		engine.Start()
		_, err := ing.PublishOne(context.Background(), &herald.Event{Type: "a.b", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		engine.Notify()
		<-entered
		engine.Stop()

		res, err := s.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: sub.ID})
		require.NoError(t, err)
		require.Len(t, res.Deliveries, 1)
		d := res.Deliveries[0]
		require.Equal(t, herald.DeliveryPending, d.State, "released for another attempt")
		require.Equal(t, 0, d.Tier)
		require.Zero(t, d.AttemptCount, "an aborted request is not an attempt")
	})
}
