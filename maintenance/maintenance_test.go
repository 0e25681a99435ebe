package maintenance_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/maintenance"
	"github.com/heraldhq/herald/store"
)

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// clock is a fake clock shared by the ingester and the maintainer.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

type staleObserver struct {
	mu    sync.Mutex
	tiers []int
}

func (o *staleObserver) ObserveStaleAlarm(tier int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tiers = append(o.tiers, tier)
}

func (o *staleObserver) ObserveRetention(*store.RetentionSweepResult) {}

func (o *staleObserver) ObserveVacuum(time.Duration, error) {}

func createSub(t *testing.T, s store.Store, types ...string) *herald.Subscription {
	t.Helper()
	sub, err := s.SubscriptionCreate(t.Context(), &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), URL: "https://example.com/hook", Method: "POST",
			EventTypes: types, Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled,
			CreatedAt: t0, UpdatedAt: t0,
		},
		Secret: "whsec_" + herald.NewID(""), Now: t0,
	})
	require.NoError(t, err)
	return sub
}

// alarms returns the data of the herald.queue.stale events delivered to
// sub, oldest first.
func alarms(t *testing.T, s store.Store, sub string) []map[string]any {
	t.Helper()
	list, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{SubscriptionID: sub, Limit: 1000})
	require.NoError(t, err)
	var out []map[string]any
	for i := len(list.Deliveries) - 1; i >= 0; i-- {
		ev, err := s.EventGet(t.Context(), &store.EventGetParams{ID: list.Deliveries[i].EventID})
		require.NoError(t, err)
		require.Equal(t, herald.EventTypeQueueStale, ev.Event.Type)
		var data map[string]any
		require.NoError(t, json.Unmarshal(ev.Event.Data, &data))
		out = append(out, data)
	}
	return out
}

func TestQueueStale(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		clk := &clock{now: t0}
		ing := ingest.New(ingest.Config{Store: s, Now: clk.Now})
		app := createSub(t, s, "app.*")
		alarm := createSub(t, s, herald.EventTypeQueueStale)
		obs := &staleObserver{}
		m := maintenance.New(maintenance.Config{
			Store: s, Publisher: ing, Tiers: 2, StaleAfter: 5 * time.Minute,
			Observer: obs, Now: clk.Now,
		})

		// One app event due at t0 in tier 0; nothing delivers it.
		_, err := ing.PublishMany(ctx, []*herald.Event{{Type: "app.created", Data: json.RawMessage(`{}`)}})
		require.NoError(t, err)

		// Not stale yet at 4m59s.
		clk.Set(t0.Add(5*time.Minute - time.Second))
		require.NoError(t, m.CheckStale(ctx))
		require.Empty(t, alarms(t, s, alarm.ID))

		// Stale at 6m: one alarm with the documented data.
		clk.Set(t0.Add(6 * time.Minute))
		require.NoError(t, m.CheckStale(ctx))
		got := alarms(t, s, alarm.ID)
		require.Len(t, got, 1)
		require.Equal(t, map[string]any{
			"tier": 0.0, "oldest_pending_age_s": 360.0, "pending": 1.0, "due": 1.0, "threshold_s": 300.0,
		}, got[0])

		// Still stale, but within the threshold period: no second alarm.
		clk.Set(t0.Add(10*time.Minute + 59*time.Second))
		require.NoError(t, m.CheckStale(ctx))
		require.Len(t, alarms(t, s, alarm.ID), 1)

		// A threshold period later: alarmed again. The app subscription's
		// delivery is untouched by all this.
		clk.Set(t0.Add(11 * time.Minute))
		require.NoError(t, m.CheckStale(ctx))
		got = alarms(t, s, alarm.ID)
		require.Len(t, got, 2)
		require.EqualValues(t, 0, got[1]["tier"])
		require.EqualValues(t, 660, got[1]["oldest_pending_age_s"])
		require.Equal(t, []int{0, 0}, obs.tiers)
		list, err := s.DeliveryList(ctx, &store.DeliveryListParams{SubscriptionID: app.ID})
		require.NoError(t, err)
		require.Len(t, list.Deliveries, 1)
		require.Equal(t, herald.DeliveryPending, list.Deliveries[0].State)
	})
}

func TestQueueStalePerTier(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		clk := &clock{now: t0}
		ing := ingest.New(ingest.Config{Store: s, Now: clk.Now})
		app := createSub(t, s, "app.*")
		alarm := createSub(t, s, herald.EventTypeQueueStale)
		m := maintenance.New(maintenance.Config{
			Store: s, Publisher: ing, Tiers: 3, StaleAfter: time.Minute, Now: clk.Now,
		})
		_, err := ing.PublishMany(ctx, []*herald.Event{{Type: "app.created", Data: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		// Move it to tier 1, due at t0+10s, by a failed attempt.
		claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
			Tier: 0, Limit: 10, Now: t0, LeaseOwner: "n", LeaseUntil: t0.Add(time.Minute),
		})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.Equal(t, app.ID, claimed[0].Subscription.ID)
		next := t0.Add(10 * time.Second)
		_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0, Outcomes: []store.DeliveryOutcome{{
			DeliveryID: claimed[0].Delivery.ID, LeaseOwner: "n",
			Attempt: herald.Attempt{N: 1, At: t0, Status: 500, Error: herald.ErrorHTTPStatus},
			State:   herald.DeliveryPending, Tier: 1, NextAttemptAt: &next,
		}}})
		require.NoError(t, err)

		// Tier 0 is empty; tier 1 has waited 1m since it matured.
		clk.Set(next.Add(time.Minute))
		require.NoError(t, m.CheckStale(ctx))
		got := alarms(t, s, alarm.ID)
		require.Len(t, got, 1)
		require.EqualValues(t, 1, got[0]["tier"])
		require.EqualValues(t, 60, got[0]["oldest_pending_age_s"])
		require.EqualValues(t, 60, got[0]["threshold_s"])

		// 61s on, the alarm's own delivery (tier 0, due when it was
		// published) is stale too, and tier 1 is due for another alarm.
		clk.Set(next.Add(2*time.Minute + time.Second))
		require.NoError(t, m.CheckStale(ctx))
		got = alarms(t, s, alarm.ID)
		require.Len(t, got, 3)
		tiers := []any{got[1]["tier"], got[2]["tier"]}
		require.ElementsMatch(t, []any{0.0, 1.0}, tiers)
	})
}

func TestSweepAndLeader(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		clk := &clock{now: t0}
		ing := ingest.New(ingest.Config{Store: s, Now: clk.Now})
		_, err := ing.PublishMany(ctx, []*herald.Event{{Type: "app.created", Data: json.RawMessage(`{}`)}}) // no subscription
		require.NoError(t, err)
		m := maintenance.New(maintenance.Config{
			Store: s, Retention: maintenance.Retention{Events: time.Hour}, Now: clk.Now,
		})
		m.Start()
		t.Cleanup(m.Stop)
		require.True(t, m.IsLeader()) // alone: elected at Start

		clk.Set(t0.Add(2 * time.Hour))
		res, err := m.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, &store.RetentionSweepResult{Events: 1}, res)
	})
}

// On PostgreSQL two nodes share the work: exactly one leads, and when it
// stops the other takes over at its next attempt.
func TestOneLeaderAcrossNodes(t *testing.T) {
	t.Parallel()
	schema := testdb.PostgresSchema(t)
	a, b := testdb.OpenPostgres(t, schema), testdb.OpenPostgres(t, schema)
	cfg := func(s store.Store) maintenance.Config {
		return maintenance.Config{Store: s, LeaderInterval: 20 * time.Millisecond}
	}
	ma, mb := maintenance.New(cfg(a)), maintenance.New(cfg(b))
	ma.Start()
	mb.Start()
	t.Cleanup(mb.Stop)
	require.True(t, ma.IsLeader(), "the first node elected at Start")
	require.False(t, mb.IsLeader())

	ma.Stop() // releases leadership
	require.False(t, ma.IsLeader())
	require.Eventually(t, mb.IsLeader, 10*time.Second, 10*time.Millisecond)
}
