package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testPublishOrder: a key's publish order is the order in which the store
// received its events, not the inserting node's clock nor the delivery ids
// (store/ordering.go). Nodes with skewed clocks are simulated by inserts
// whose Now and Event.CreatedAt go back in time.
func testPublishOrder(t *testing.T, newStore NewStoreFunc) {
	// Node A (clock 10 s ahead) publishes d1, then node B (clock right)
	// publishes d2: d1 is the head of the key.
	t.Run("FIFOInsertOrderNotClock", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingFIFO, 0)
		d1 := b.publishKeyed(t, now.Add(10*time.Second), sub.ID, "k", nil)
		d2 := b.publishKeyed(t, now, sub.ID, "k", nil)
		d3 := b.publishKeyed(t, now.Add(5*time.Second), sub.ID, "k", nil)
		at := now.Add(time.Minute)

		b.requireWaitingFor(t, at, d2, store.WaitingForKey)
		c1 := b.claimOne(t, 0, ownerA, at, d1)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: at}), "k is held")
		b.complete(t, at, delivered(c1, ownerA, at))
		c2 := b.claimOne(t, 0, ownerA, at, d2)
		b.complete(t, at, delivered(c2, ownerA, at))
		b.claimOne(t, 0, ownerA, at, d3)
	})

	// Several events of one key in one call (a batch publish, or one group
	// commit) keep the call's order, whatever their delivery ids say.
	t.Run("FIFOCallOrderNotID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingFIFO, 0)
		early, late := herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery)
		require.Less(t, early, late)
		ids := []string{late, early} // the first event's delivery has the greater id
		events := make([]store.EventInsert, len(ids))
		for i, id := range ids {
			events[i] = store.EventInsert{
				Event:      newEvent(func(e *herald.Event) { e.Key = "k" }),
				Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: sub.ID, NextAttemptAt: now}},
			}
		}
		_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: events, Now: now})
		require.NoError(t, err)

		c := b.claimOne(t, 0, ownerA, now, late)
		b.complete(t, now, delivered(c, ownerA, now))
		b.claimOne(t, 0, ownerA, now, early)
	})

	// latest without versions: the newest inserted wins, and one inserted
	// after a delivered one is never skipped as older, however far behind
	// its node's clock is.
	t.Run("LatestVersionlessInsertOrderNotClock", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingLatest, 0)
		a := b.publishKeyed(t, now.Add(10*time.Second), sub.ID, "k", nil)
		newest := b.publishKeyed(t, now, sub.ID, "k", nil)
		at := now.Add(time.Minute)

		c := b.claimOne(t, 0, ownerA, at, newest)
		b.requireState(t, herald.DeliverySuperseded, a)
		b.complete(t, at, delivered(c, ownerA, at))

		behind := b.publishKeyed(t, now.Add(-time.Hour), sub.ID, "k", nil)
		b.requireWaitingFor(t, at, behind, store.WaitingForNothing)
		b.claimOne(t, 0, ownerA, at, behind)
		b.requireState(t, herald.DeliveryInFlight, behind)
	})

	// A retried delivery takes its original position again: inserted
	// first, it is the head again, before one inserted later with an
	// earlier clock.
	t.Run("RetryKeepsInsertPosition", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingFIFO, 0)
		d1 := b.publishKeyed(t, now.Add(10*time.Second), sub.ID, "k", nil)
		at := now.Add(time.Minute)
		c1 := b.claimOne(t, 0, ownerA, at, d1)
		b.complete(t, at, died(c1, ownerA, at))
		d2 := b.publishKeyed(t, now, sub.ID, "k", nil)
		_, err := b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: d1, Now: at})
		require.NoError(t, err)
		b.requireWaitingFor(t, at, d2, store.WaitingForKey)
		b.claimOne(t, 0, ownerA, at, d1)
	})
}
