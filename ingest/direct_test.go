package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// fakeDispatcher grants up to free slots and records what it was handed.
type fakeDispatcher struct {
	mu        sync.Mutex
	free      int
	reserved  int
	cancelled int
	started   []*store.ClaimedDelivery
}

func (f *fakeDispatcher) DispatchReserve(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := min(n, f.free)
	f.free -= got
	f.reserved += got
	return got
}

func (f *fakeDispatcher) DispatchLease(sub *herald.Subscription, now time.Time) (string, time.Time) {
	return "node-test", now.Add(sub.Timeout() + time.Minute)
}

func (f *fakeDispatcher) DispatchStart(ds []*store.ClaimedDelivery, _ time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, ds...)
}

func (f *fakeDispatcher) DispatchCancel(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled += n
	f.free += n
}

func (f *fakeDispatcher) snapshot() (reserved, cancelled int, started []*store.ClaimedDelivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reserved, f.cancelled, append([]*store.ClaimedDelivery(nil), f.started...)
}

// Direct dispatch leases only deliveries of subscriptions a claim would not
// hold back, at most as many as the dispatcher grants, and hands over
// exactly the committed ones with what a claim would have returned.
func TestDirectDispatchLeases(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		plain := createSub(t, s, []string{"direct.*"}, nil, herald.SubscriptionEnabled)
		modded := func(mod func(*herald.Subscription)) *herald.Subscription {
			sub := createSub(t, s, []string{"direct.*"}, nil, herald.SubscriptionEnabled)
			mod(sub)
			updated, err := s.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: sub, Now: time.Now()})
			require.NoError(t, err)
			return updated
		}
		fifo := modded(func(s *herald.Subscription) { s.Ordering = herald.OrderingFIFO })
		limited := modded(func(s *herald.Subscription) { s.RateLimit = &herald.RateLimit{Max: 5, PerSeconds: 1} })
		capped := modded(func(s *herald.Subscription) { s.MaxInFlight = 2 })
		rotated := time.Now().UTC()
		require.NoError(t, s.SubscriptionSecretRotate(ctx, &store.SubscriptionSecretRotateParams{
			ID: plain.ID, NewSecret: "whsec_dGhlIG5ldyBzZWNyZXQgb2YgdGhpcyB0ZXN0IQ==", GraceUntil: rotated.Add(time.Hour), Now: rotated,
		}))

		d := &fakeDispatcher{free: 100}
		ing := setup(t, s, Config{Dispatcher: d})
		ev := event("direct.one", `{"n":1}`)
		version := int64(7)
		ev.Key, ev.Version = "k1", &version
		res, err := ing.PublishOne(ctx, ev)
		require.NoError(t, err)
		require.Equal(t, 4, res.DeliveryCount)

		reserved, cancelled, started := d.snapshot()
		require.Equal(t, 1, reserved, "only the unordered, unthrottled subscription qualifies")
		require.Zero(t, cancelled)
		require.Len(t, started, 1)
		c := started[0]
		require.Equal(t, plain.ID, c.Subscription.ID)
		require.Equal(t, 1, c.Attempt)
		require.Len(t, c.Secrets, 2, "both secrets sign during the grace period")

		got, err := s.EventGet(ctx, &store.EventGetParams{ID: res.ID})
		require.NoError(t, err)
		states := map[string]herald.DeliveryState{}
		for _, dl := range got.Deliveries {
			states[dl.SubscriptionID] = dl.State
			if dl.SubscriptionID == plain.ID {
				require.Equal(t, c.Delivery.ID, dl.ID)
				require.Equal(t, dl.EventKey, c.Delivery.EventKey)
				require.Equal(t, dl.EventVersion, c.Delivery.EventVersion)
			}
		}
		require.Equal(t, map[string]herald.DeliveryState{
			plain.ID: herald.DeliveryInFlight, fifo.ID: herald.DeliveryPending,
			limited.ID: herald.DeliveryPending, capped.ID: herald.DeliveryPending,
		}, states)
		require.Equal(t, got.Event.ID, c.Event.ID)
		require.JSONEq(t, string(got.Event.Data), string(c.Event.Data))
		require.Equal(t, got.Event.Key, c.Event.Key)
	})
}

// The dispatcher's grant caps the leases; the rest stay pending. A failed
// commit and a duplicate event give their reservations back.
func TestDirectDispatchReservations(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		createSub(t, s, nil, nil, herald.SubscriptionEnabled)

		d := &fakeDispatcher{free: 3}
		ing := setup(t, s, Config{Dispatcher: d})
		events := make([]*herald.Event, 5)
		for i := range events {
			events[i] = event("grant.test", `{}`)
		}
		res, err := ing.PublishMany(ctx, events)
		require.NoError(t, err)
		_, _, started := d.snapshot()
		require.Len(t, started, 3)
		inFlight := 0
		for _, r := range res {
			got, err := s.EventGet(ctx, &store.EventGetParams{ID: r.ID})
			require.NoError(t, err)
			if got.Deliveries[0].State == herald.DeliveryInFlight {
				inFlight++
			}
		}
		require.Equal(t, 3, inFlight)

		// A duplicate: the reservation comes back, nothing starts.
		d2 := &fakeDispatcher{free: 10}
		ing2 := setup(t, s, Config{Dispatcher: d2})
		_, err = ing2.PublishOne(ctx, &herald.Event{ID: res[0].ID, Type: "grant.test"})
		require.NoError(t, err)
		reserved, cancelled, started := d2.snapshot()
		require.Equal(t, 1, reserved)
		require.Equal(t, 1, cancelled)
		require.Empty(t, started)

		// A failed commit: every reservation comes back, nothing starts.
		g := &gatedStore{Store: s, poison: true}
		d3 := &fakeDispatcher{free: 10}
		ing3 := setup(t, g, Config{Dispatcher: d3})
		_, err = ing3.PublishMany(ctx, []*herald.Event{event("grant.test", `{}`), event("grant.test", `{}`)})
		require.Error(t, err)
		reserved, cancelled, started = d3.snapshot()
		require.Equal(t, 2, reserved)
		require.Equal(t, 2, cancelled)
		require.Empty(t, started)
	})
}

// A paused subscription (Retry-After) is not dispatched directly until its
// pause ends, and a tier-0 delay disables direct dispatch.
func TestDirectDispatchRespectsPauseAndDelay(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		sub := createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		now := time.Now().UTC().Truncate(time.Millisecond)
		clock := now

		// Pause the subscription through a completion, as the engine does.
		seed := setup(t, s, Config{})
		res, err := seed.PublishOne(ctx, event("pause.test", `{}`))
		require.NoError(t, err)
		claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
			Limit: 1, Now: now.Add(time.Second), LeaseOwner: "n", LeaseUntil: now.Add(time.Minute), LeaseMargin: time.Second,
		})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.Equal(t, res.ID, claimed[0].Event.ID)
		until := now.Add(time.Minute)
		_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{
			Outcomes: []store.DeliveryOutcome{{
				DeliveryID: claimed[0].Delivery.ID, LeaseOwner: "n", State: herald.DeliveryPending, Tier: 1, NextAttemptAt: &until,
				Attempt: herald.Attempt{N: 1, At: now, Status: 429, Error: herald.ErrorHTTPStatus},
			}},
			PauseSubscriptions: []store.SubscriptionPause{{ID: sub.ID, Until: until}},
			Now:                now,
		})
		require.NoError(t, err)

		var mu sync.Mutex
		d := &fakeDispatcher{free: 10}
		ing := setup(t, s, Config{Dispatcher: d, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
		_, err = ing.PublishOne(ctx, event("pause.test", `{}`))
		require.NoError(t, err)
		reserved, _, _ := d.snapshot()
		require.Zero(t, reserved, "paused: no direct dispatch")

		mu.Lock()
		clock = until
		mu.Unlock()
		_, err = ing.PublishOne(ctx, event("pause.test", `{}`))
		require.NoError(t, err)
		_, _, started := d.snapshot()
		require.Len(t, started, 1, "the pause ended")

		delayed := &fakeDispatcher{free: 10}
		ingDelayed := setup(t, s, Config{Dispatcher: delayed, Tier0Delay: time.Second})
		_, err = ingDelayed.PublishOne(ctx, event("pause.test", `{}`))
		require.NoError(t, err)
		reserved, _, _ = delayed.snapshot()
		require.Zero(t, reserved, "a tier-0 delay: deliveries mature later, never direct")
	})
}
