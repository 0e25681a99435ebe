package delivery

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
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// heldBacklog stores n deliveries of a subscription to types, fails them
// up to tier (due now), then disables the subscription: work due in a
// retry tier that no claim can take.
func heldBacklog(t *testing.T, s store.Store, n, tier int) *herald.Subscription {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub := rebalanceSub(t, s, "http://127.0.0.1:1/never", "held.*")
	const chunk = 500
	for lo := 0; lo < n; lo += chunk {
		var ins []store.EventInsert
		for range min(chunk, n-lo) {
			ins = append(ins, store.EventInsert{
				Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "held.one", Data: json.RawMessage(`{}`), CreatedAt: now},
				Deliveries: []store.DeliveryInsert{{
					ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now.Add(-time.Hour),
				}},
			})
		}
		_, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: ins, Now: now})
		require.NoError(t, err)
	}
	for from := 0; from < tier; from++ {
		for moved := 0; moved < n; {
			claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
				Tier: from, Limit: chunk, Now: now, LeaseOwner: "setup", LeaseUntil: now.Add(time.Minute),
			})
			require.NoError(t, err)
			require.NotEmpty(t, claimed)
			due := now.Add(-time.Minute)
			outs := make([]store.DeliveryOutcome, len(claimed))
			for i, c := range claimed {
				outs[i] = store.DeliveryOutcome{
					DeliveryID: c.Delivery.ID, LeaseOwner: "setup", State: herald.DeliveryPending, Tier: from + 1, NextAttemptAt: &due,
					Attempt: herald.Attempt{N: c.Attempt, At: now, Status: 500, Error: herald.ErrorHTTPStatus, Tier: from},
				}
			}
			_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outs, Now: now})
			require.NoError(t, err)
			moved += len(claimed)
		}
	}
	off := *sub
	off.State, off.DisabledReason = herald.SubscriptionDisabled, "410 Gone"
	_, err := s.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: &off, Now: now})
	require.NoError(t, err)
	return sub
}

func rebalanceSub(t *testing.T, s store.Store, url, types string) *herald.Subscription {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub, err := s.SubscriptionCreate(t.Context(), &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), URL: url, Method: http.MethodPost, EventTypes: []string{types},
			Ordering: herald.OrderingNone, TimeoutMS: 5000, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
		},
		Secret: webhook.NewSecret(), Now: now,
	})
	require.NoError(t, err)
	return sub
}

// A large due backlog of a disabled subscription in a retry tier draws no
// workers from tier 0, and fresh events are delivered at tier 0's speed
// (issue 10, item 5: 20,000 such deliveries in tier 2 made 200 fresh ones
// take 7.2 s instead of 0.4 s).
func TestRebalanceIgnoresHeldBacklog(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		heldBacklog(t, s, 2000, 2)
		st, err := s.StatsGet(t.Context(), &store.StatsGetParams{Tiers: len(DefaultTiers), Now: time.Now()})
		require.NoError(t, err)
		require.Zero(t, st.Tiers[2].Due)
		require.EqualValues(t, 2000, st.Tiers[2].Held)

		var got atomic.Int64
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(400 * time.Millisecond) // a receiver that takes its time
			got.Add(1)
		}))
		t.Cleanup(recv.Close)
		rebalanceSub(t, s, recv.URL, "fresh.*")

		const workers = 64
		e := New(Config{
			Store: s, Sender: webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
			Tiers: DefaultTiers, Workers: workers, Seed: 1, PollInterval: 100 * time.Millisecond,
		})
		// One rebalance, as the engine makes every second: tier 0 keeps
		// the surplus (its standing weight), tier 2 its one worker.
		e.rebalance(context.Background())
		slots := make([]int64, len(e.tiers))
		for i, tr := range e.tiers {
			slots[i] = tr.slots.Load()
		}
		t.Logf("workers per tier: %v", slots)
		require.GreaterOrEqual(t, slots[0], int64(workers/2), "tier 0 keeps most workers")
		require.LessOrEqual(t, slots[2], int64(4), "the held backlog draws no surplus")

		// End to end: 200 fresh deliveries to a 400 ms receiver. With 50
		// workers they take four rounds (about 3 s under -race on a loaded
		// machine); starved to the few workers the held backlog left tier
		// 0 (2 of 64 in one rebalance, a few more as running requests add
		// to its weight), they took about 13 s. The bound sits far from
		// both.
		ing := ingest.New(ingest.Config{Store: s, OnCommit: e.Notify, Dispatcher: e})
		ing.Start()
		e.Start()
		t.Cleanup(func() {
			ing.Close()
			e.Stop()
		})
		events := make([]*herald.Event, 200)
		for i := range events {
			events[i] = &herald.Event{Type: "fresh.one", Data: json.RawMessage(`{}`)}
		}
		start := time.Now()
		_, err = ing.PublishMany(t.Context(), events)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return got.Load() >= 200 }, 30*time.Second, 5*time.Millisecond)
		took := time.Since(start)
		t.Logf("200 fresh deliveries behind 2,000 held in tier 2: %s", took.Round(time.Millisecond))
		require.Less(t, took, 8*time.Second)
	})
}
