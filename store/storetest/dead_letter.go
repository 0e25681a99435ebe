package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func testDeadLetter(t *testing.T, newStore NewStoreFunc) {
	// deadAt makes n deliveries of subID dead, the i-th dying at times[i].
	deadAt := func(t *testing.T, b *bundle, subID string, times ...time.Time) []string {
		t.Helper()
		var ids []string
		for _, at := range times {
			_, d := b.publish(t, now, subID)
			c := b.claimOne(t, 0, ownerA, now, d[0])
			res := b.complete(t, at, died(c, ownerA, now))
			require.Equal(t, 1, res.Applied)
			ids = append(ids, d[0])
		}
		return ids
	}

	t.Run("RedriveRange", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub, other := b.createSub(t), b.createSub(t)
		t1, t2, t3 := now.Add(time.Minute), now.Add(2*time.Minute), now.Add(3*time.Minute)
		ids := deadAt(t, b, sub.ID, t1, t2, t3)
		otherIDs := deadAt(t, b, other.ID, t2)
		_, live := b.publish(t, now.Add(time.Hour), sub.ID) // pending: not a dead letter

		// [Since, Until): t2 in, t3 out.
		at := now.Add(time.Hour)
		n, err := b.store.DeadLetterRedrive(b.ctx, &store.DeadLetterRedriveParams{
			SubscriptionID: sub.ID, Since: t2, Until: t3, Now: at,
		})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		d := b.delivery(t, ids[1])
		require.Equal(t, herald.DeliveryPending, d.State)
		require.Zero(t, d.Tier)
		requireTimePtrEqual(t, &at, d.NextAttemptAt)
		b.requireState(t, herald.DeliveryDead, ids[0], ids[2], otherIDs[0])
		b.requireState(t, herald.DeliveryPending, live[0])

		// Only Since: t3 onwards.
		n, err = b.store.DeadLetterRedrive(b.ctx, &store.DeadLetterRedriveParams{SubscriptionID: sub.ID, Since: t3, Now: at})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.requireState(t, herald.DeliveryPending, ids[2])

		// Zero bounds: every remaining dead letter of the subscription, and
		// only of that subscription.
		n, err = b.store.DeadLetterRedrive(b.ctx, &store.DeadLetterRedriveParams{SubscriptionID: sub.ID, Now: at})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.requireState(t, herald.DeliveryPending, ids...)
		b.requireState(t, herald.DeliveryDead, otherIDs[0])

		n, err = b.store.DeadLetterRedrive(b.ctx, &store.DeadLetterRedriveParams{SubscriptionID: sub.ID, Now: at})
		require.NoError(t, err)
		require.Zero(t, n, "nothing left to redrive")

		// Redriven deliveries are claimable in tier 0.
		claimed := b.claim(t, store.DeliveryClaimParams{Now: at})
		require.ElementsMatch(t, append(ids, live[0]), claimedIDs(claimed))
	})

	t.Run("RedriveUntilOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		t1, t2 := now.Add(time.Minute), now.Add(2*time.Minute)
		ids := deadAt(t, b, sub.ID, t1, t2)
		n, err := b.store.DeadLetterRedrive(b.ctx, &store.DeadLetterRedriveParams{SubscriptionID: sub.ID, Until: t2, Now: t2})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.requireState(t, herald.DeliveryPending, ids[0])
		b.requireState(t, herald.DeliveryDead, ids[1])
	})
}
