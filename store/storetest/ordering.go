package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testOrdering covers per-key ordering (store/ordering.go): fifo, latest,
// the key interval, keyless deliveries and lease rescue.
func testOrdering(t *testing.T, newStore NewStoreFunc) {
	t.Run("FIFOInOrderThroughRetries", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingFIFO, 0)
		d1 := b.publishKeyed(t, now, sub.ID, "k", nil)
		d2 := b.publishKeyed(t, now.Add(time.Millisecond), sub.ID, "k", nil)
		d3 := b.publishKeyed(t, now.Add(2*time.Millisecond), sub.ID, "k", nil)
		other := b.publishKeyed(t, now.Add(3*time.Millisecond), sub.ID, "other", nil)
		at := now.Add(time.Second)

		// One per key: the head of k and the head of other.
		claimed := b.claim(t, store.DeliveryClaimParams{Now: at})
		require.ElementsMatch(t, []string{d1, other}, claimedIDs(claimed))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: at}), "k is held")

		// d1 fails and waits in tier 1: d2 still waits for it.
		c1 := claimedByID(claimed, d1)
		retryAt := at.Add(time.Minute)
		b.complete(t, at, retried(c1, ownerA, at, retryAt))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: at.Add(time.Second)}), "d2 waits for the head in tier 1")
		b.requireWaitingFor(t, at.Add(time.Second), d2, store.WaitingForKey)
		b.requireWaitingFor(t, at.Add(time.Second), d1, store.WaitingForMaturity)

		// The head is retried from tier 1 and delivered; then d2, then d3.
		c1 = b.claimOne(t, 1, ownerA, retryAt, d1)
		b.complete(t, retryAt, delivered(c1, ownerA, retryAt))
		b.requireWaitingFor(t, retryAt, d2, store.WaitingForNothing)
		c2 := b.claimOne(t, 0, ownerA, retryAt, d2)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: retryAt}))
		b.complete(t, retryAt, delivered(c2, ownerA, retryAt))
		b.claimOne(t, 0, ownerA, retryAt, d3)
	})

	t.Run("FIFODeadHeadUnblocks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingFIFO, 0)
		d1 := b.publishKeyed(t, now, sub.ID, "k", nil)
		d2 := b.publishKeyed(t, now.Add(time.Millisecond), sub.ID, "k", nil)
		c1 := b.claimOne(t, 0, ownerA, now.Add(time.Second), d1)
		b.complete(t, now.Add(time.Second), died(c1, ownerA, now.Add(time.Second)))
		b.requireState(t, herald.DeliveryDead, d1)
		b.claimOne(t, 0, ownerA, now.Add(time.Second), d2)
	})

	t.Run("LatestSkipAndSupersede", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingLatest, 0)
		v1 := b.publishKeyed(t, now, sub.ID, "k", ptr[int64](1))
		v3 := b.publishKeyed(t, now.Add(time.Millisecond), sub.ID, "k", ptr[int64](3))
		v2 := b.publishKeyed(t, now.Add(2*time.Millisecond), sub.ID, "k", ptr[int64](2))
		at := now.Add(time.Second)

		// The newest version is sent; the older pending ones are superseded.
		c3 := b.claimOne(t, 0, ownerA, at, v3)
		b.requireState(t, herald.DeliverySuperseded, v1, v2)

		// While v3 is in flight, v4 waits (one at a time per key).
		v4 := b.publishKeyed(t, at, sub.ID, "k", ptr[int64](4))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: at}))
		b.requireWaitingFor(t, at, v4, store.WaitingForKey)
		b.complete(t, at, delivered(c3, ownerA, at))

		// v4 fails and waits in tier 1; a late v2 and a duplicate v3 are
		// skipped (not newer than delivered 3), v5 supersedes v4.
		c4 := b.claimOne(t, 0, ownerA, at, v4)
		b.complete(t, at, retried(c4, ownerA, at, at.Add(time.Hour)))
		late2 := b.publishKeyed(t, at.Add(time.Millisecond), sub.ID, "k", ptr[int64](2))
		dup3 := b.publishKeyed(t, at.Add(2*time.Millisecond), sub.ID, "k", ptr[int64](3))
		v5 := b.publishKeyed(t, at.Add(3*time.Millisecond), sub.ID, "k", ptr[int64](5))
		at2 := at.Add(time.Second)
		c5 := b.claimOne(t, 0, ownerA, at2, v5)
		b.requireState(t, herald.DeliverySkipped, late2, dup3)
		b.requireState(t, herald.DeliverySuperseded, v4)

		// A failed older version never lowers the last delivered version:
		// v5 delivered, then a v4 arriving later is skipped.
		b.complete(t, at2, delivered(c5, ownerA, at2))
		late4 := b.publishKeyed(t, at2, sub.ID, "k", ptr[int64](4))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: at2}))
		b.requireState(t, herald.DeliverySkipped, late4)

		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 2, Now: at2})
		require.NoError(t, err)
		require.Equal(t, int64(3), st.Skipped)
		require.Equal(t, int64(3), st.Superseded)
	})

	t.Run("LatestVersionlessByPublishOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingLatest, 0)
		a := b.publishKeyed(t, now, sub.ID, "k", nil)
		bb := b.publishKeyed(t, now.Add(time.Millisecond), sub.ID, "k", nil)
		at := now.Add(time.Second)
		c := b.claimOne(t, 0, ownerA, at, bb)
		b.requireState(t, herald.DeliverySuperseded, a)
		b.complete(t, at, delivered(c, ownerA, at))
		cNext := b.publishKeyed(t, at, sub.ID, "k", nil)
		b.claimOne(t, 0, ownerA, at, cNext)
	})

	t.Run("KeyInterval", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingFIFO, 1000)
		d1 := b.publishKeyed(t, now, sub.ID, "k", nil)
		d2 := b.publishKeyed(t, now.Add(time.Millisecond), sub.ID, "k", nil)
		c1 := b.claimOne(t, 0, ownerA, now, d1)
		b.complete(t, now.Add(10*time.Millisecond), delivered(c1, ownerA, now.Add(10*time.Millisecond)))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(999 * time.Millisecond)}), "1s between sends to k")
		b.requireWaitingFor(t, now.Add(999*time.Millisecond), d2, store.WaitingForKey)
		next, err := b.store.DeliveryNextDue(b.ctx, &store.DeliveryNextDueParams{Tier: 0, Now: now.Add(500 * time.Millisecond)})
		require.NoError(t, err)
		require.NotNil(t, next, "the end of the interval wakes the tier")
		requireTimeEqual(t, now.Add(time.Second), *next)
		b.claimOne(t, 0, ownerA, now.Add(time.Second), d2)
	})

	// A claim that started its requests later than its Now (it waited for
	// the writer or for locks: Clock says when it holds them) counts the
	// key interval from that start, so the next send is never early.
	t.Run("KeyIntervalFromClaimStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingLatest, 1000)
		d1 := b.publishKeyed(t, now, sub.ID, "k", ptr[int64](1))
		started := now.Add(300 * time.Millisecond)
		claimed := b.claim(t, store.DeliveryClaimParams{Now: now, Clock: func() time.Time { return started }})
		require.Equal(t, []string{d1}, claimedIDs(claimed))
		b.complete(t, started.Add(10*time.Millisecond), delivered(claimed[0], ownerA, started.Add(10*time.Millisecond)))
		d2 := b.publishKeyed(t, started.Add(20*time.Millisecond), sub.ID, "k", ptr[int64](2))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Second)}),
			"1 s after Now is only 700 ms after the send started")
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: started.Add(999 * time.Millisecond)}))
		b.claimOne(t, 0, ownerA, started.Add(time.Second), d2)
	})

	t.Run("KeylessUnordered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, mode := range []herald.Ordering{herald.OrderingFIFO, herald.OrderingLatest} {
			sub := b.createOrderedSub(t, mode, 1000)
			ids := []string{
				b.publishKeyed(t, now, sub.ID, "", nil),
				b.publishKeyed(t, now, sub.ID, "", ptr[int64](1)),
				b.publishKeyed(t, now, sub.ID, "", ptr[int64](1)),
			}
			claimed := b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Second)})
			require.ElementsMatch(t, ids, claimedIDs(claimed), "%s: keyless deliveries go in parallel", mode)
		}
	})

	t.Run("RescueFreesKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingFIFO, 0)
		d1 := b.publishKeyed(t, now, sub.ID, "k", nil)
		d2 := b.publishKeyed(t, now.Add(time.Millisecond), sub.ID, "k", nil)
		claimed := b.claim(t, store.DeliveryClaimParams{Now: now, LeaseUntil: now.Add(time.Minute), LeaseOwner: ownerA})
		require.Equal(t, []string{d1}, claimedIDs(claimed))
		lease := claimed[0].LeaseUntil

		// Node A dies. Until its lease expires the key stays held.
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: lease, LeaseOwner: ownerB}))
		n, err := b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: lease.Add(time.Millisecond)})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		// The key is free again, and d1 is still its head.
		c1 := b.claimOne(t, 0, ownerB, lease.Add(time.Millisecond), d1)
		// Node A's late outcome is stale and does not free B's key.
		res := b.complete(t, lease.Add(2*time.Millisecond), delivered(claimed[0], ownerA, lease))
		require.Equal(t, []string{d1}, res.Stale)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: lease.Add(3 * time.Millisecond), LeaseOwner: ownerB}))
		b.complete(t, lease.Add(3*time.Millisecond), delivered(c1, ownerB, lease.Add(3*time.Millisecond)))
		b.claimOne(t, 0, ownerB, lease.Add(4*time.Millisecond), d2)
	})

	t.Run("ReleaseFreesKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingLatest, 0)
		v1 := b.publishKeyed(t, now, sub.ID, "k", ptr[int64](1))
		b.claimOne(t, 0, ownerA, now, v1)
		n, err := b.store.DeliveryRelease(b.ctx, &store.DeliveryReleaseParams{IDs: []string{v1}, LeaseOwner: ownerA, Now: now})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.claimOne(t, 0, ownerB, now, v1)
	})

	t.Run("NoneIgnoresKeys", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingNone, 0)
		ids := []string{
			b.publishKeyed(t, now, sub.ID, "k", ptr[int64](2)),
			b.publishKeyed(t, now, sub.ID, "k", ptr[int64](1)),
		}
		require.ElementsMatch(t, ids, claimedIDs(b.claim(t, store.DeliveryClaimParams{})))
		b.requireWaitingFor(t, now, ids[0], store.WaitingForNothing)
	})

	t.Run("PublishOrder", func(t *testing.T) { testPublishOrder(t, newStore) })
}

// createOrderedSub stores an unthrottled subscription with an ordering mode
// and key interval.
func (b *bundle) createOrderedSub(t *testing.T, ordering herald.Ordering, intervalMS int64) *herald.Subscription {
	t.Helper()
	return b.createSub(t, func(s *herald.Subscription) {
		s.Ordering, s.KeyIntervalMS = ordering, intervalMS
		s.RateLimit, s.MaxInFlight = nil, 0
	})
}

// publishKeyed stores one event with a key and version, committed at at
// (its publish position) and due at at, with one delivery for subID.
func (b *bundle) publishKeyed(t *testing.T, at time.Time, subID, key string, version *int64) string {
	t.Helper()
	ev := newEvent(func(e *herald.Event) { e.Key, e.Version, e.CreatedAt = key, version, at })
	id := herald.NewID(herald.PrefixDelivery)
	_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: at, Events: []store.EventInsert{{
		Event:      ev,
		Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: subID, NextAttemptAt: at}},
	}}})
	require.NoError(t, err)
	return id
}

func (b *bundle) requireWaitingFor(t *testing.T, at time.Time, id string, want store.WaitingFor) {
	t.Helper()
	got, err := b.store.DeliveryWaitingFor(b.ctx, &store.DeliveryWaitingForParams{ID: id, Now: at})
	require.NoError(t, err)
	require.Equal(t, want, got, "waiting_for of %s", id)
}

func claimedByID(claimed []*store.ClaimedDelivery, id string) *store.ClaimedDelivery {
	for _, c := range claimed {
		if c.Delivery.ID == id {
			return c
		}
	}
	return nil
}
