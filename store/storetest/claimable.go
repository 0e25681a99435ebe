package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testClaimable covers TierStats.Due and Held (issue 10, item 5): Due
// counts only what a claim at Now could take, so the rebalancer never
// weights a tier by work of disabled, deleted, paused or rate-limited
// subscriptions; Held counts the rest.
func testClaimable(t *testing.T, newStore NewStoreFunc) {
	rateLimited := func(max int) func(*herald.Subscription) {
		return func(s *herald.Subscription) { s.RateLimit = &herald.RateLimit{Max: max, PerSeconds: 60} }
	}
	stats := func(t *testing.T, b *bundle, at time.Time) *store.Stats {
		t.Helper()
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: at})
		require.NoError(t, err)
		return st
	}

	t.Run("DueIsClaimable", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		due := func(i int) time.Time { return now.Add(-time.Minute) }

		// Throttled subscriptions first, each claimed alone so its budget
		// is spent exactly.
		spent := b.createSub(t, rateLimited(2)) // budget 0: 3 held
		b.publishMany(t, 5, spent.ID, due)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{}), 2)
		capped := b.createSub(t, func(s *herald.Subscription) { s.MaxInFlight = 1 }) // at its cap: 2 held
		b.publishMany(t, 3, capped.ID, due)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{}), 1)
		partial := b.createSub(t, rateLimited(5)) // budget 3 of 4 due
		b.publishMany(t, 6, partial.ID, due)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{Limit: 2}), 2)

		roomy := b.createSub(t, rateLimited(10)) // budget 10: its 4 are due
		b.publishMany(t, 4, roomy.ID, due)
		plain := b.createSub(t)
		b.publishMany(t, 3, plain.ID, func(int) time.Time { return now.Add(-10 * time.Second) })
		b.publishMany(t, 1, plain.ID, func(int) time.Time { return now.Add(time.Hour) }) // not due
		disabled := b.createSub(t)
		b.publishMany(t, 4, disabled.ID, func(int) time.Time { return now.Add(-time.Hour) }) // the oldest
		b.disable(t, disabled)
		paused := b.createSub(t)
		b.publishMany(t, 2, paused.ID, due)
		_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			PauseSubscriptions: []store.SubscriptionPause{{ID: paused.ID, Until: now.Add(time.Hour)}}, Now: now,
		})
		require.NoError(t, err)

		st := stats(t, b, now)
		require.Equal(t, []store.TierStats{{
			Tier: 0, Pending: 3 + 4 + 2 + 4 + 4 + 4 + 2, InFlight: 5,
			Due:  3 + 4 + 3,         // plain, roomy, partial
			Held: 3 + 1 + 2 + 4 + 2, // spent, partial, capped, disabled, paused
			// The disabled backlog is older but held: the age is that of
			// the oldest claimable delivery.
			OldestPendingAge: time.Minute,
		}}, st.Tiers)
		require.EqualValues(t, 3+2+2, st.Throttled, "spent, capped and paused have no budget")

		// Due names what a claim takes: claiming everything takes exactly
		// Due deliveries and leaves Held pending.
		claimed := b.claim(t, store.DeliveryClaimParams{Limit: 1000})
		require.Len(t, claimed, 3+4+3)
		st = stats(t, b, now)
		require.Zero(t, st.Tiers[0].Due)
		require.EqualValues(t, 3+1+2+4+2, st.Tiers[0].Held)
		require.Zero(t, st.Tiers[0].OldestPendingAge)

		// Re-enabled and after the pause, their backlog is due again.
		en := *disabled
		en.State, en.DisabledReason = herald.SubscriptionEnabled, ""
		_, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: &en, Now: now})
		require.NoError(t, err)
		// Two hours on, every rate window is empty again: spent may start
		// 2 of its 3, partial its last one; capped still has one in
		// flight; plain's hour-away delivery has matured.
		st = stats(t, b, now.Add(2*time.Hour))
		require.Equal(t, store.TierStats{
			Tier: 0, Pending: 3 + 1 + 2 + 4 + 2 + 1, InFlight: 5 + 10,
			Due:              4 + 2 + 2 + 1 + 1, // disabled, paused, spent, partial, plain
			Held:             1 + 2,             // spent, capped
			OldestPendingAge: 2*time.Hour + time.Hour,
		}, st.Tiers[0])
	})
}
