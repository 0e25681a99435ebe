package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// window is the widened rate window of a per_seconds=1 subscription.
const window = time.Second + store.ThrottleMargin

// spaced makes deliveries due from start, one millisecond apart (claim
// order is then publish order).
func spaced(start time.Time) func(i int) time.Time {
	return func(i int) time.Time { return start.Add(time.Duration(i) * time.Millisecond) }
}

func testThrottle(t *testing.T, newStore NewStoreFunc) {
	rateLimited := func(max, per int) func(*herald.Subscription) {
		return func(s *herald.Subscription) { s.RateLimit = &herald.RateLimit{Max: max, PerSeconds: per} }
	}
	nextDue := func(t *testing.T, b *bundle, tier int, at time.Time) *time.Time {
		t.Helper()
		next, err := b.store.DeliveryNextDue(b.ctx, &store.DeliveryNextDueParams{Tier: tier, Now: at})
		require.NoError(t, err)
		return next
	}

	// NextDue asked before any throttled subscription existed (stores may
	// cache which kinds exist) still sees the first one made since.
	t.Run("NextDueSeesNewThrottled", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		plain := b.createSub(t)
		b.publishMany(t, 1, plain.ID, spaced(now.Add(time.Hour)))
		requireTimeEqual(t, now.Add(time.Hour), *nextDue(t, b, 0, now))

		sub := b.createSub(t, rateLimited(1, 1))
		ids := b.publishMany(t, 2, sub.ID, spaced(now.Add(-time.Minute)))
		require.Equal(t, ids[:1], claimedIDs(b.claim(t, store.DeliveryClaimParams{Limit: 1})))
		// ids[1] waits for the budget, not for the hour-away delivery.
		requireTimeEqual(t, now.Add(window), *nextDue(t, b, 0, now.Add(time.Millisecond)))
	})

	// A sliding window: budget comes back start by start, as each leaves
	// the window, not all at once at a fixed boundary.
	t.Run("RateLimitSlidingWindow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t, rateLimited(3, 1))
		ids := b.publishMany(t, 10, sub.ID, spaced(now.Add(-time.Minute)))

		require.Equal(t, ids[:2], claimedIDs(b.claim(t, store.DeliveryClaimParams{Limit: 2})))
		require.Equal(t, ids[2:3], claimedIDs(b.claim(t, store.DeliveryClaimParams{Now: now.Add(600 * time.Millisecond)})))
		// At the limit: nothing, however large the claim.
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(window - time.Millisecond)}))
		b.requireWaitingFor(t, now.Add(window-time.Millisecond), ids[9], store.WaitingForRateLimit)
		b.requireWaitingFor(t, now.Add(window-time.Millisecond), ids[0], store.WaitingForNothing) // in flight
		// The budget returns when the oldest starts leave the window.
		requireTimeEqual(t, now.Add(window), *nextDue(t, b, 0, now.Add(700*time.Millisecond)))
		// The two starts at now leave together; the one at +600ms stays.
		require.Equal(t, ids[3:5], claimedIDs(b.claim(t, store.DeliveryClaimParams{Now: now.Add(window)})))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(window + 500*time.Millisecond)}))
		require.Equal(t, ids[5:6], claimedIDs(b.claim(t, store.DeliveryClaimParams{Now: now.Add(600*time.Millisecond + window)})))

		// Waiting did not use attempts.
		d := b.delivery(t, ids[9])
		require.Equal(t, herald.DeliveryPending, d.State)
		require.Equal(t, 0, d.AttemptCount)
	})

	// Claimers whose Now values interleave (two nodes, clocks a little
	// apart) still never exceed the budget: starts are recorded in
	// non-decreasing order per subscription.
	t.Run("RateLimitInterleavedNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t, rateLimited(2, 1))
		b.publishMany(t, 5, sub.ID, spaced(now.Add(-time.Minute)))

		require.Len(t, b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseOwner: ownerA, Now: now.Add(500 * time.Millisecond)}), 1)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseOwner: ownerB, Now: now}), 1)
		// Both count as started at +500ms: at +1.5s, no budget yet.
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(1500 * time.Millisecond)}))
		require.Len(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(500*time.Millisecond + window)}), 2)
	})

	// A throttled subscription takes no slot it cannot use: the rest of
	// the claim goes to the others.
	t.Run("OutOfBudgetTakesNoSlots", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		slow := b.createSub(t, rateLimited(1, 60))
		fast := b.createSub(t)
		b.publishMany(t, 50, slow.ID, spaced(now.Add(-time.Hour)))
		fastIDs := b.publishMany(t, 6, fast.ID, spaced(now.Add(-time.Minute)))

		first := b.claim(t, store.DeliveryClaimParams{Limit: 4})
		require.Len(t, first, 4)
		counts := map[string]int{}
		for _, c := range first {
			counts[c.Delivery.SubscriptionID]++
		}
		require.Equal(t, 1, counts[slow.ID], "the slow subscription's budget is 1")
		require.Equal(t, 3, counts[fast.ID])
		second := b.claim(t, store.DeliveryClaimParams{Limit: 4, Now: now.Add(time.Second)})
		require.Len(t, second, 3)
		for _, c := range second {
			require.Equal(t, fast.ID, c.Delivery.SubscriptionID)
		}
		require.Subset(t, fastIDs, claimedIDs(second))

		// The slow one's work is not due for NextDue until its budget
		// returns (a minute + margin after its start).
		requireTimeEqual(t, now.Add(time.Minute+store.ThrottleMargin), *nextDue(t, b, 0, now.Add(time.Second)))
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 2, Now: now.Add(time.Second)})
		require.NoError(t, err)
		require.EqualValues(t, 49, st.Throttled)
	})

	t.Run("MaxInFlight", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t, func(s *herald.Subscription) { s.MaxInFlight = 2 })
		ids := b.publishMany(t, 5, sub.ID, spaced(now.Add(-time.Minute)))

		first := b.claim(t, store.DeliveryClaimParams{})
		require.Equal(t, ids[:2], claimedIDs(first))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{LeaseOwner: ownerB, Now: now.Add(time.Second)}))
		// At its cap only a completion frees it: NextDue does not report
		// work the claim would refuse (no spinning).
		require.Nil(t, nextDue(t, b, 0, now.Add(time.Second)))
		b.requireWaitingFor(t, now.Add(time.Second), ids[2], store.WaitingForInFlightCap)
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 2, Now: now.Add(time.Second)})
		require.NoError(t, err)
		require.EqualValues(t, 3, st.Throttled)

		// One finishes; one more may start. The cap spans tiers: the
		// retried one, due in tier 1, counts once claimed there.
		b.complete(t, now.Add(time.Second), retried(first[0], ownerA, now.Add(time.Second), now.Add(2*time.Second)))
		requireTimeEqual(t, now.Add(-time.Minute+2*time.Millisecond), *nextDue(t, b, 0, now.Add(time.Second)))
		require.Equal(t, ids[2:3], claimedIDs(b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Second)})))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Tier: 1, Now: now.Add(3 * time.Second)}))
		b.complete(t, now.Add(3*time.Second), delivered(first[1], ownerA, now.Add(3*time.Second)))
		require.Equal(t, ids[:1], claimedIDs(b.claim(t, store.DeliveryClaimParams{Tier: 1, Now: now.Add(3 * time.Second)})))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(3 * time.Second)}))

		// Expired leases rescued and reclaimed still count once each.
		n, err := b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: now.Add(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Hour)}), 2)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Tier: 1, Now: now.Add(time.Hour)}))
	})

	// A Retry-After pause, written with the outcome, holds the whole
	// subscription; other subscriptions are not affected; a pause only
	// ever extends.
	t.Run("Pause", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		other := b.createSub(t)
		ids := b.publishMany(t, 3, sub.ID, spaced(now.Add(-time.Minute)))
		otherIDs := b.publishMany(t, 1, other.ID, spaced(now.Add(-30*time.Second)))

		c := b.claim(t, store.DeliveryClaimParams{Limit: 1})
		require.Equal(t, ids[:1], claimedIDs(c))
		until := now.Add(time.Minute)
		_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes:           []store.DeliveryOutcome{retried(c[0], ownerA, now, until)},
			PauseSubscriptions: []store.SubscriptionPause{{ID: sub.ID, Until: until}},
			Now:                now,
		})
		require.NoError(t, err)
		// An earlier pause does not shorten it.
		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			PauseSubscriptions: []store.SubscriptionPause{{ID: sub.ID, Until: now.Add(time.Second)}},
			Now:                now,
		})
		require.NoError(t, err)

		require.Equal(t, otherIDs, claimedIDs(b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Second)})))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(30 * time.Second)}))
		requireTimeEqual(t, until, *nextDue(t, b, 0, now.Add(30*time.Second)))
		b.requireWaitingFor(t, now.Add(30*time.Second), ids[1], store.WaitingForPaused)
		b.requireWaitingFor(t, now.Add(30*time.Second), ids[0], store.WaitingForMaturity)
		b.requireWaitingFor(t, until, ids[1], store.WaitingForNothing)
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 2, Now: now.Add(30 * time.Second)})
		require.NoError(t, err)
		require.EqualValues(t, 2, st.Throttled)

		require.Equal(t, ids[1:], claimedIDs(b.claim(t, store.DeliveryClaimParams{Now: until})))
		require.Equal(t, ids[:1], claimedIDs(b.claim(t, store.DeliveryClaimParams{Tier: 1, Now: until})))
		require.Nil(t, nextDue(t, b, 0, until))
	})

	// fifo/latest subscriptions are throttled too (their own claim path).
	t.Run("Ordered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, ordering := range []herald.Ordering{herald.OrderingFIFO, herald.OrderingLatest} {
			sub := b.createSub(t, func(s *herald.Subscription) {
				s.Ordering, s.KeyIntervalMS = ordering, 0
				s.RateLimit = &herald.RateLimit{Max: 3, PerSeconds: 60}
				s.MaxInFlight = 2
			})
			for i := range 6 {
				b.publishKeyed(t, now.Add(-time.Minute+time.Duration(i)*time.Millisecond), sub.ID, fmt.Sprintf("k%d", i), nil)
			}
		}
		// Two subscriptions, each capped at 2 in flight.
		first := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, first, 4)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Second)}))
		// Completions free the cap; the rate limit (3 a minute) then
		// allows one more each.
		for _, c := range first {
			b.complete(t, now.Add(time.Second), delivered(c, ownerA, now.Add(time.Second)))
		}
		require.Len(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(2 * time.Second)}), 2)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(3 * time.Second)}))
	})

	// A throttled fifo subscription with budget whose due work waits for a
	// busy key is not reported due: the completion wakes the engine.
	t.Run("OrderedBlockedNotDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t, func(s *herald.Subscription) {
			s.Ordering, s.KeyIntervalMS = herald.OrderingFIFO, 0
			s.RateLimit = &herald.RateLimit{Max: 10, PerSeconds: 60}
		})
		b.publishKeyed(t, now.Add(-time.Minute), sub.ID, "k", nil)
		b.publishKeyed(t, now.Add(-time.Minute+time.Millisecond), sub.ID, "k", nil)
		b.publishKeyed(t, now.Add(time.Hour), sub.ID, "k", nil)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{}), 1)
		requireTimeEqual(t, now.Add(time.Hour), *nextDue(t, b, 0, now.Add(time.Second)))
	})

	// Unthrottled subscriptions see none of it.
	t.Run("Unthrottled", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ids := b.publishMany(t, 150, sub.ID, spaced(now.Add(-time.Minute)))
		require.Len(t, b.claim(t, store.DeliveryClaimParams{Limit: 150}), len(ids))
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
		require.NoError(t, err)
		require.Zero(t, st.Throttled)
	})

	t.Run("ClaimClock", func(t *testing.T) { testThrottleClaimClock(t, newStore) })
}
