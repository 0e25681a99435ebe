package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/store"
)

func testStats(t *testing.T, newStore NewStoreFunc) {
	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 3, Now: now})
		require.NoError(t, err)
		require.Equal(t, &store.Stats{Tiers: []store.TierStats{{Tier: 0}, {Tier: 1}, {Tier: 2}}}, st)
	})

	// DeliveredTotal is a running count: a delivered delivery that is
	// retried and delivered again counts twice, and the total never goes
	// down when the delivered row moves back to pending.
	t.Run("DeliveredTotalIsRunning", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		b.complete(t, now, delivered(c, ownerA, now))
		_, err := b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: ids[0], Now: now})
		require.NoError(t, err)
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
		require.NoError(t, err)
		require.EqualValues(t, 1, st.DeliveredTotal, "retrying does not take the delivery back out of the total")
		c = b.claimOne(t, 0, ownerA, now, ids[0])
		b.complete(t, now, delivered(c, ownerA, now))
		st, err = b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
		require.NoError(t, err)
		require.EqualValues(t, 2, st.DeliveredTotal)
	})

	t.Run("Counts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		// Claim first what must end up in flight, delivered, dead or in
		// tier 1, then publish the tier-0 pending ones (so no claim takes
		// them).
		_, work := b.publish(t, now.Add(-time.Hour), sub.ID, sub.ID, sub.ID, sub.ID, sub.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 5)
		require.ElementsMatch(t, work, claimedIDs(claimed))
		b.complete(t, now,
			delivered(claimed[0], ownerA, now),
			delivered(claimed[1], ownerA, now),
			died(claimed[2], ownerA, now),
			retried(claimed[3], ownerA, now, now.Add(time.Minute)), // tier 1, not due
		) // claimed[4] stays in flight in tier 0

		b.publish(t, now.Add(-90*time.Second), sub.ID) // due, oldest
		b.publish(t, now.Add(-10*time.Second), sub.ID) // due
		b.publish(t, now, sub.ID)                      // due (exactly now)
		b.publish(t, now.Add(time.Hour), sub.ID)       // not due

		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 4, Now: now})
		require.NoError(t, err)
		require.Equal(t, []store.TierStats{
			{Tier: 0, Pending: 4, InFlight: 1, Due: 3, OldestPendingAge: 90 * time.Second},
			{Tier: 1, Pending: 1},
			{Tier: 2},
			{Tier: 3},
		}, st.Tiers)
		require.EqualValues(t, 1, st.Dead)
		require.EqualValues(t, 2, st.DeliveredTotal)

		// A minute later the tier-1 retry is due too.
		st, err = b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 2, Now: now.Add(time.Minute)})
		require.NoError(t, err)
		require.Len(t, st.Tiers, 2)
		require.Equal(t, store.TierStats{Tier: 1, Pending: 1, Due: 1}, st.Tiers[1])
	})
}
