package metrics_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/metrics"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// signalObserver forwards to the metrics observer and signals each attempt
// once it is counted, so the test waits for events, not for time.
type signalObserver struct {
	*metrics.Observer
	attempts chan string
}

func (o *signalObserver) ObserveAttempt(a *delivery.AttemptObservation) {
	o.Observer.ObserveAttempt(a)
	o.attempts <- a.Outcome
}

// gather returns the registry's families by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// value finds the sample of family name whose labels include labels and
// returns its counter or gauge value, or its histogram's sample count.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "series %s missing", name)
	for _, m := range f.GetMetric() {
		match := 0
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match != len(labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no sample of %s with labels %v", name, labels)
	return 0
}

func TestSeriesMoveWhenEventsFlow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := testdb.SQLite(t)

	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(ok.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(failing.Close)
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) }))
	t.Cleanup(gone.Close)

	now := time.Now().UTC()
	for _, u := range []string{ok.URL, failing.URL, gone.URL} {
		_, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{
			Subscription: &herald.Subscription{
				ID: herald.NewID(herald.PrefixSubscription), URL: u, Method: "POST",
				EventTypes: []string{"app.*"}, Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled,
				CreatedAt: now, UpdatedAt: now,
			},
			Secret: "whsec_" + herald.NewID(""), Now: now,
		})
		require.NoError(t, err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStatsCollector(s, 2))
	mo := metrics.NewObserver(reg)
	obs := &signalObserver{Observer: mo, attempts: make(chan string, 100)}

	var engine *delivery.Engine
	ing := ingest.New(ingest.Config{Store: s, Observer: mo, OnCommit: func() { engine.Notify() }})
	engine = delivery.New(delivery.Config{
		Store:        s,
		Sender:       webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
		Fanout:       ing.Fanout(),
		Tiers:        delivery.Tiers{0, 0}, // two attempts, no wait between
		Workers:      4,
		PollInterval: 50 * time.Millisecond,
		Observer:     obs,
	})
	ing.Start()
	engine.Start()
	t.Cleanup(func() { ing.Close(); engine.Stop() })

	// Every documented series exists before anything happened.
	fams := gather(t, reg)
	for _, name := range []string{
		"herald_delivery_attempts_total", "herald_deliveries_total", "herald_publish_duration_seconds",
		"herald_retention_deleted_total", "herald_queue_vacuum_duration_seconds", "herald_queue_pending", "herald_queue_in_flight",
		"herald_queue_due", "herald_queue_oldest_pending_age_seconds", "herald_deliveries_dead", "herald_store_up",
	} {
		require.Contains(t, fams, name)
	}
	require.Zero(t, value(t, fams, "herald_delivery_attempts_total", map[string]string{"outcome": "delivered"}))

	// Three events through group commit, one through the batch API: each
	// goes to the three subscriptions.
	for range 3 {
		_, err := ing.PublishOne(ctx, &herald.Event{Type: "app.created", Data: json.RawMessage(`{"n":1}`)})
		require.NoError(t, err)
	}
	_, err := ing.PublishMany(ctx, []*herald.Event{{Type: "app.created", Data: json.RawMessage(`{"n":2}`)}})
	require.NoError(t, err)

	// Expected attempts: 4 delivered; the failing endpoint 4 retries then
	// 4 dead; the 410 one disables its subscription on the first "gone"
	// (later deliveries of it may also be attempted before the disable
	// commits, each one "gone").
	counts := map[string]int{}
	for counts[delivery.OutcomeDelivered] < 4 || counts[delivery.OutcomeDead] < 4 || counts[delivery.OutcomeGone] < 1 {
		select {
		case oc := <-obs.attempts:
			counts[oc]++
		case <-time.After(20 * time.Second):
			t.Fatalf("attempts so far: %v", counts)
		}
	}

	fams = gather(t, reg)
	require.EqualValues(t, 4, value(t, fams, "herald_delivery_attempts_total", map[string]string{"outcome": "delivered", "error_class": "none"}))
	require.EqualValues(t, 4, value(t, fams, "herald_delivery_attempts_total", map[string]string{"outcome": "retry", "error_class": "http_status"}))
	require.EqualValues(t, 4, value(t, fams, "herald_delivery_attempts_total", map[string]string{"outcome": "dead", "error_class": "http_status"}))
	require.GreaterOrEqual(t, value(t, fams, "herald_delivery_attempts_total", map[string]string{"outcome": "gone", "error_class": "gone"}), 1.0)
	require.EqualValues(t, 4, value(t, fams, "herald_deliveries_total", map[string]string{"outcome": "delivered"}))
	require.GreaterOrEqual(t, value(t, fams, "herald_deliveries_total", map[string]string{"outcome": "dead"}), 5.0)
	require.EqualValues(t, 4, value(t, fams, "herald_publish_to_delivery_seconds", nil))
	require.EqualValues(t, 4, value(t, fams, "herald_publish_duration_seconds", map[string]string{"result": "ok"}))
	require.GreaterOrEqual(t, value(t, fams, "herald_ingest_commit_batch_size", nil), 2.0)
	require.GreaterOrEqual(t, value(t, fams, "herald_completion_batch_size", nil), 1.0)
	require.GreaterOrEqual(t, value(t, fams, "herald_completion_duration_seconds", nil), 1.0)
	require.GreaterOrEqual(t, value(t, fams, "herald_deliveries_dead", nil), 5.0)
	require.EqualValues(t, 1, value(t, fams, "herald_store_up", nil))
}
