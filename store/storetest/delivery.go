package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func testDelivery(t *testing.T, newStore NewStoreFunc) {
	t.Run("GetNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		_, err := b.store.DeliveryGet(b.ctx, herald.NewID(herald.PrefixDelivery))
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("GetAttemptsInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)

		// Attempt n is made from tier n-1: two retries, then dead.
		var want []herald.Attempt
		at := now
		for tier := range 3 {
			c := b.claimOne(t, tier, ownerA, at, ids[0])
			require.Equal(t, tier+1, c.Attempt)
			out := retried(c, ownerA, at, at.Add(time.Minute))
			if tier == 2 {
				out = died(c, ownerA, at)
			}
			b.complete(t, at, out)
			want = append(want, out.Attempt)
			at = at.Add(time.Minute)
		}
		res, err := b.store.DeliveryGet(b.ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, herald.DeliveryDead, res.Delivery.State)
		require.Equal(t, 2, res.Delivery.Tier, "a dead delivery stays in the tier it died in")
		require.Equal(t, 3, res.Delivery.AttemptCount)
		requireAttemptsEqual(t, want, res.Attempts)
		for i, a := range res.Attempts {
			require.Equal(t, i+1, a.N)
			require.Equal(t, i, a.Tier)
		}
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		subA, subB := b.createSub(t), b.createSub(t)
		ev1, ids1 := b.publish(t, now, subA.ID, subB.ID)
		_, ids2 := b.publish(t, now.Add(time.Hour), subA.ID)
		_, ids3 := b.publish(t, now.Add(time.Hour), subA.ID, subB.ID)
		all := slices.Concat(ids1, ids2, ids3)
		// Claim the two due now; deliver subA's, leave subB's in flight.
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.ElementsMatch(t, ids1, claimedIDs(claimed))
		for _, c := range claimed {
			if c.Delivery.ID == ids1[0] {
				b.complete(t, now, delivered(c, ownerA, now))
			}
		}

		list := func(p store.DeliveryListParams) ([]string, bool) {
			t.Helper()
			res, err := b.store.DeliveryList(b.ctx, &p)
			require.NoError(t, err)
			return deliveryIDs(res.Deliveries), res.More
		}
		newestFirst := func(ids ...string) []string {
			out := slices.Clone(ids)
			slices.Sort(out)
			slices.Reverse(out)
			return out
		}

		got, more := list(store.DeliveryListParams{})
		require.Equal(t, newestFirst(all...), got)
		require.False(t, more)

		got, _ = list(store.DeliveryListParams{SubscriptionID: subA.ID})
		require.Equal(t, newestFirst(ids1[0], ids2[0], ids3[0]), got)
		got, _ = list(store.DeliveryListParams{EventID: ev1.ID})
		require.Equal(t, newestFirst(ids1...), got)
		got, _ = list(store.DeliveryListParams{State: herald.DeliveryDelivered})
		require.Equal(t, []string{ids1[0]}, got)
		got, _ = list(store.DeliveryListParams{State: herald.DeliveryInFlight})
		require.Equal(t, []string{ids1[1]}, got)
		got, _ = list(store.DeliveryListParams{SubscriptionID: subB.ID, State: herald.DeliveryPending})
		require.Equal(t, []string{ids3[1]}, got)
		got, _ = list(store.DeliveryListParams{SubscriptionID: subA.ID, EventID: ev1.ID, State: herald.DeliveryPending})
		require.Empty(t, got)

		// Paging: newest first, Before is exclusive.
		want := newestFirst(all...)
		got, more = list(store.DeliveryListParams{Limit: 2})
		require.Equal(t, want[:2], got)
		require.True(t, more)
		got, more = list(store.DeliveryListParams{Limit: 2, Before: want[1]})
		require.Equal(t, want[2:4], got)
		require.True(t, more)
		got, more = list(store.DeliveryListParams{Limit: 2, Before: want[3]})
		require.Equal(t, want[4:], got)
		require.False(t, more)
		got, more = list(store.DeliveryListParams{Limit: 5})
		require.Equal(t, want, got)
		require.False(t, more, "an exact fit has no further page")
		got, _ = list(store.DeliveryListParams{SubscriptionID: subA.ID, Limit: 1, Before: want[0]})
		require.Len(t, got, 1)
	})

	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now.Add(-time.Minute), sub.ID, sub.ID)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{LeaseOwner: ownerA}), 2)

		n, err := b.store.DeliveryRelease(b.ctx, &store.DeliveryReleaseParams{IDs: ids, LeaseOwner: ownerB, Now: now})
		require.NoError(t, err)
		require.Zero(t, n, "only the lease owner may release")
		b.requireState(t, herald.DeliveryInFlight, ids...)

		at := now.Add(10 * time.Second)
		n, err = b.store.DeliveryRelease(b.ctx, &store.DeliveryReleaseParams{IDs: ids, LeaseOwner: ownerA, Now: at})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		for _, id := range ids {
			d := b.delivery(t, id)
			require.Equal(t, herald.DeliveryPending, d.State)
			require.Zero(t, d.Tier)
			require.Zero(t, d.AttemptCount, "a release is not an attempt")
			requireTimePtrEqual(t, &at, d.NextAttemptAt, "due at the release time")
			require.Empty(t, b.attempts(t, id))
		}
		// Released work is claimable by anyone, at once.
		require.Len(t, b.claim(t, store.DeliveryClaimParams{LeaseOwner: ownerB, Now: at}), 2)

		n, err = b.store.DeliveryRelease(b.ctx, &store.DeliveryReleaseParams{LeaseOwner: ownerB, Now: at})
		require.NoError(t, err)
		require.Zero(t, n, "no ids, nothing released")
	})

	t.Run("Rescue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t, func(s *herald.Subscription) { s.TimeoutMS = 1_000 })
		_, ids := b.publish(t, now, sub.ID, sub.ID, sub.ID)
		// Short lease for the first, long for the second, third delivered.
		short := b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseUntil: now.Add(2 * time.Second)})
		long := b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseUntil: now.Add(time.Hour)})
		done := b.claim(t, store.DeliveryClaimParams{Limit: 1})
		require.Len(t, short, 1)
		require.Len(t, long, 1)
		require.Len(t, done, 1)
		b.complete(t, now, delivered(done[0], ownerA, now))

		n, err := b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: now.Add(time.Second)})
		require.NoError(t, err)
		require.Zero(t, n, "no lease has expired yet")

		at := now.Add(3 * time.Second)
		n, err = b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: at})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		d := b.delivery(t, short[0].Delivery.ID)
		require.Equal(t, herald.DeliveryPending, d.State)
		require.Zero(t, d.Tier)
		require.Zero(t, d.AttemptCount)
		requireTimePtrEqual(t, &at, d.NextAttemptAt)
		b.requireState(t, herald.DeliveryInFlight, long[0].Delivery.ID)
		b.requireState(t, herald.DeliveryDelivered, done[0].Delivery.ID)
		require.ElementsMatch(t, ids, []string{short[0].Delivery.ID, long[0].Delivery.ID, done[0].Delivery.ID})
	})

	t.Run("Retry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID, sub.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 2)
		for _, c := range claimed {
			out := died(c, ownerA, now)
			if c.Delivery.ID == ids[1] {
				out = delivered(c, ownerA, now)
			}
			b.complete(t, now, retried(c, ownerA, now, now)) // to tier 1 first
			c2 := b.claimOne(t, 1, ownerA, now, c.Delivery.ID)
			out.DeliveryID, out.Attempt.N, out.Tier, out.Attempt.Tier = c2.Delivery.ID, c2.Attempt, 1, 1
			b.complete(t, now, out)
		}
		b.requireState(t, herald.DeliveryDead, ids[0])
		b.requireState(t, herald.DeliveryDelivered, ids[1])

		at := now.Add(time.Hour)
		for _, id := range ids { // dead and delivered alike: any finished state
			d, err := b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: id, Now: at})
			require.NoError(t, err)
			require.Equal(t, id, d.ID)
			require.Equal(t, herald.DeliveryPending, d.State)
			require.Zero(t, d.Tier)
			requireTimePtrEqual(t, &at, d.NextAttemptAt)
			got := b.delivery(t, id)
			require.Equal(t, herald.DeliveryPending, got.State)
			require.Zero(t, got.Tier)
			requireTimePtrEqual(t, &at, got.NextAttemptAt)
			require.Len(t, b.attempts(t, id), 2, "history is kept")
		}
		claimed = b.claim(t, store.DeliveryClaimParams{Tier: 0, Now: at})
		require.ElementsMatch(t, ids, claimedIDs(claimed))
		require.Equal(t, 3, claimed[0].Attempt, "attempt numbers keep counting")
	})

	t.Run("RetryConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID, sub.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 2)
		// ids[0] stays in flight; ids[1] is delivered.
		for _, c := range claimed {
			if c.Delivery.ID == ids[1] {
				b.complete(t, now, delivered(c, ownerA, now))
			}
		}
		_, err := b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: ids[0], Now: now})
		require.ErrorIs(t, err, herald.ErrConflict, "in flight")

		_, pending := b.publish(t, now.Add(time.Hour), sub.ID)
		_, err = b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: pending[0], Now: now})
		require.ErrorIs(t, err, herald.ErrConflict, "pending")
		b.requireState(t, herald.DeliveryPending, pending[0])

		_, err = b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: herald.NewID(herald.PrefixDelivery), Now: now})
		require.ErrorIs(t, err, herald.ErrNotFound)

		// Cancelled by the subscription's deletion: finished, but there is
		// no subscription to deliver to any more.
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: sub.ID, Now: now}))
		b.requireState(t, herald.DeliveryCancelled, ids[0], pending[0])
		for _, id := range []string{ids[0], ids[1]} { // cancelled and delivered
			_, err = b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: id, Now: now})
			require.ErrorIs(t, err, herald.ErrConflict, "deleted subscription")
		}
		b.requireState(t, herald.DeliveryCancelled, ids[0])
		b.requireState(t, herald.DeliveryDelivered, ids[1])
	})
}
