package metrics_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/metrics"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// recordObserver passes each attempt's observation on to the test.
type recordObserver struct {
	*metrics.Observer
	seen chan delivery.AttemptObservation
}

func (o *recordObserver) ObserveAttempt(a *delivery.AttemptObservation) {
	o.Observer.ObserveAttempt(a)
	o.seen <- *a
}

// A dead letter redriven and then delivered is marked Redriven, so the
// latency history (History.ObserveAttempt) leaves its time dead out; a
// first-time delivery is not.
func TestRedrivenDeliveryIsMarked(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := testdb.SQLite(t)
	var fail atomic.Bool
	fail.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	now := time.Now().UTC()
	subID := herald.NewID(herald.PrefixSubscription)
	_, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: subID, URL: srv.URL, Method: "POST",
			EventTypes: []string{"app.*"}, Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled,
			CreatedAt: now, UpdatedAt: now,
		},
		Secret: "whsec_" + herald.NewID(""), Now: now,
	})
	require.NoError(t, err)

	hist := metrics.NewHistory(nil)
	obs := &recordObserver{Observer: metrics.NewObserver(prometheus.NewRegistry()).WithHistory(hist), seen: make(chan delivery.AttemptObservation, 10)}
	var engine *delivery.Engine
	ing := ingest.New(ingest.Config{Store: s, OnCommit: func() { engine.Notify() }})
	engine = delivery.New(delivery.Config{
		Store:        s,
		Sender:       webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
		Fanout:       ing.Fanout(),
		Tiers:        delivery.Tiers{0}, // one attempt: a failure is dead at once
		Workers:      1,
		PollInterval: 20 * time.Millisecond,
		Observer:     obs,
	})
	ing.Start()
	engine.Start()
	t.Cleanup(func() { ing.Close(); engine.Stop() })

	next := func() delivery.AttemptObservation {
		t.Helper()
		select {
		case a := <-obs.seen:
			return a
		case <-time.After(20 * time.Second):
			t.Fatal("no attempt observed")
			return delivery.AttemptObservation{}
		}
	}
	_, err = ing.PublishOne(ctx, &herald.Event{Type: "app.created", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	a := next()
	require.Equal(t, delivery.OutcomeDead, a.Outcome)
	require.False(t, a.Redriven)

	fail.Store(false)
	n, err := s.DeadLetterRedrive(ctx, &store.DeadLetterRedriveParams{SubscriptionID: subID, Now: time.Now().UTC()})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	engine.Notify()
	a = next()
	require.Equal(t, delivery.OutcomeDelivered, a.Outcome)
	require.True(t, a.Redriven, "a redriven dead letter is marked")
	latencies := func() (delivered, withLatency int) {
		for _, p := range hist.Points() {
			delivered += p.Delivered
			if p.LatencyP50 != nil {
				withLatency++
			}
		}
		return delivered, withLatency
	}
	d, l := latencies()
	require.Equal(t, 1, d, "the redriven delivery counts as delivered")
	require.Zero(t, l, "but not in the latency history")

	_, err = ing.PublishOne(ctx, &herald.Event{Type: "app.created", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	a = next()
	require.Equal(t, delivery.OutcomeDelivered, a.Outcome)
	require.False(t, a.Redriven, "a first delivery is not")
	d, l = latencies()
	require.Equal(t, 2, d)
	require.Equal(t, 1, l, "a first delivery's latency is charted")
}
