package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testTiers covers deliveries in tiers beyond the configured ones (issue
// 10, item 6): StatsGet reports every tier holding work, the same on both
// stores, and DeliveryTierClamp moves that work to the last configured
// tier.
func testTiers(t *testing.T, newStore NewStoreFunc) {
	t.Run("ClampMovesRemovedTiers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		// walk publishes a delivery and fails it up to tier, where it is
		// due at due.
		walk := func(tier int, due time.Time) string {
			t.Helper()
			id := b.publishMany(t, 1, sub.ID, func(int) time.Time { return now.Add(-time.Hour) })[0]
			for i := 0; i < tier; i++ {
				next := now.Add(-time.Hour)
				if i+1 == tier {
					next = due
				}
				c := b.claimOne(t, i, ownerA, now, id)
				b.complete(t, now, retried(c, ownerA, now, next))
			}
			return id
		}
		due := map[string]time.Time{}
		for _, w := range []struct {
			tier int
			due  time.Time
		}{{1, now.Add(time.Hour)}, {2, now.Add(2 * time.Hour)}, {3, now.Add(3 * time.Hour)}, {3, now.Add(4 * time.Hour)}, {6, now.Add(5 * time.Hour)}} {
			due[walk(w.tier, w.due)] = w.due
		}
		flying := walk(3, now.Add(-time.Minute))
		b.claimOne(t, 3, ownerB, now, flying)

		// Configured with two tiers, the store still reports the others
		// (without gaps).
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 2, Now: now})
		require.NoError(t, err)
		require.Equal(t, []store.TierStats{
			{Tier: 0}, {Tier: 1, Pending: 1}, {Tier: 2, Pending: 1}, {Tier: 3, Pending: 2, InFlight: 1},
			{Tier: 4}, {Tier: 5}, {Tier: 6, Pending: 1},
		}, st.Tiers)

		res, err := b.store.DeliveryTierClamp(b.ctx, &store.DeliveryTierClampParams{Tiers: 2, Now: now})
		require.NoError(t, err)
		require.Equal(t, &store.DeliveryTierClampResult{Moved: map[int]int{2: 1, 3: 3, 6: 1}, To: 1}, res)
		require.Equal(t, 5, res.Total())

		st, err = b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 2, Now: now})
		require.NoError(t, err)
		require.Equal(t, []store.TierStats{{Tier: 0}, {Tier: 1, Pending: 5, InFlight: 1}}, st.Tiers)
		for id, at := range due {
			d := b.delivery(t, id)
			require.Equal(t, 1, d.Tier)
			require.Equal(t, herald.DeliveryPending, d.State)
			requireTimePtrEqual(t, &at, d.NextAttemptAt, "the due time is kept")
		}
		// The one in flight keeps its lease; rescued, it waits in tier 1.
		d := b.delivery(t, flying)
		require.Equal(t, herald.DeliveryInFlight, d.State)
		require.Equal(t, 1, d.Tier)
		n, err := b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: now.Add(2 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, 1, n)

		// Every one of them is claimable from tier 1.
		claimed := b.claim(t, store.DeliveryClaimParams{Tier: 1, Now: now.Add(5 * time.Hour)})
		require.Len(t, claimed, 6)

		// Nothing left beyond tier 1: a second clamp moves nothing.
		res, err = b.store.DeliveryTierClamp(b.ctx, &store.DeliveryTierClampParams{Tiers: 2, Now: now})
		require.NoError(t, err)
		require.Zero(t, res.Total())
		require.Empty(t, res.Moved)
	})

	t.Run("ClampRefusesNoTiers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		_, err := b.store.DeliveryTierClamp(b.ctx, &store.DeliveryTierClampParams{Tiers: 0, Now: now})
		require.Error(t, err)
		require.Equal(t, herald.CodeInvalidField, herald.ErrorCode(err))
		require.Equal(t, 0, b.delivery(t, ids[0]).Tier)
	})
}
