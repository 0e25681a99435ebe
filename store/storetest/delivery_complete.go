package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func testDeliveryComplete(t *testing.T, newStore NewStoreFunc) {
	t.Run("Delivered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])

		done := now.Add(2 * time.Second)
		out := delivered(c, ownerA, now.Add(time.Second))
		res := b.complete(t, done, out)
		require.Equal(t, 1, res.Applied)
		require.Empty(t, res.Stale)

		d := b.delivery(t, ids[0])
		require.Equal(t, herald.DeliveryDelivered, d.State)
		require.Equal(t, 1, d.AttemptCount)
		require.Zero(t, d.Tier)
		require.Nil(t, d.NextAttemptAt)
		require.Equal(t, 200, d.LastStatus)
		require.Equal(t, herald.ErrorNone, d.LastError)
		requireTimeEqual(t, done, d.UpdatedAt)
		requireAttemptsEqual(t, []herald.Attempt{out.Attempt}, b.attempts(t, ids[0]))

		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Hour)}), "finished work is not claimed")
	})

	t.Run("Retry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])

		next := now.Add(5 * time.Second)
		out := retried(c, ownerA, now, next)
		res := b.complete(t, now, out)
		require.Equal(t, 1, res.Applied)

		d := b.delivery(t, ids[0])
		require.Equal(t, herald.DeliveryPending, d.State)
		require.Equal(t, 1, d.Tier)
		require.Equal(t, 1, d.AttemptCount)
		requireTimePtrEqual(t, &next, d.NextAttemptAt)
		require.Equal(t, 500, d.LastStatus)
		require.Equal(t, herald.ErrorHTTPStatus, d.LastError)
		require.Equal(t, out.Attempt.ErrorMessage, d.LastMessage)
		requireAttemptsEqual(t, []herald.Attempt{out.Attempt}, b.attempts(t, ids[0]))

		nextDue, err := b.store.DeliveryNextDue(b.ctx, &store.DeliveryNextDueParams{Tier: 1})
		require.NoError(t, err)
		requireTimePtrEqual(t, &next, nextDue)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Tier: 1}), "not mature yet")
		c = b.claimOne(t, 1, ownerA, next, ids[0])
		require.Equal(t, 2, c.Attempt)
	})

	t.Run("Dead", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		res := b.complete(t, now, died(c, ownerA, now))
		require.Equal(t, 1, res.Applied)

		d := b.delivery(t, ids[0])
		require.Equal(t, herald.DeliveryDead, d.State)
		require.Nil(t, d.NextAttemptAt)
		require.Equal(t, 500, d.LastStatus)
		require.Equal(t, herald.ErrorHTTPStatus, d.LastError)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Hour)}))
	})

	t.Run("StaleOwner", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])

		// Another owner's outcome: the attempt is recorded (it was made),
		// the state is not touched.
		wrong := delivered(c, ownerB, now)
		res := b.complete(t, now, wrong)
		require.Zero(t, res.Applied)
		require.Equal(t, []string{ids[0]}, res.Stale)
		d := b.delivery(t, ids[0])
		require.Equal(t, herald.DeliveryInFlight, d.State)
		require.Zero(t, d.AttemptCount)
		requireAttemptsEqual(t, []herald.Attempt{wrong.Attempt}, b.attempts(t, ids[0]))

		// The real owner still completes it.
		right := delivered(c, ownerA, now.Add(time.Second))
		res = b.complete(t, now.Add(time.Second), right)
		require.Equal(t, 1, res.Applied)
		require.Empty(t, res.Stale)
		b.requireState(t, herald.DeliveryDelivered, ids[0])
		requireAttemptsEqual(t, []herald.Attempt{wrong.Attempt, right.Attempt}, b.attempts(t, ids[0]))

		// Completing a finished delivery again is stale too.
		res = b.complete(t, now.Add(2*time.Second), right)
		require.Zero(t, res.Applied)
		require.Equal(t, []string{ids[0]}, res.Stale)
		b.requireState(t, herald.DeliveryDelivered, ids[0])
	})

	t.Run("StaleAfterRescue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t, func(s *herald.Subscription) { s.TimeoutMS = 1_000 })
		_, ids := b.publish(t, now, sub.ID)
		// Node A claims with a short lease and goes quiet.
		claimedA := b.claim(t, store.DeliveryClaimParams{LeaseOwner: ownerA, LeaseUntil: now.Add(time.Second)})
		require.Len(t, claimedA, 1)

		later := now.Add(time.Minute)
		n, err := b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: later})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		cB := b.claimOne(t, 0, ownerB, later, ids[0])
		require.Equal(t, 1, cB.Attempt, "a rescued delivery was never completed: same attempt number")

		// A's late answer does not steal B's lease.
		res := b.complete(t, later, delivered(claimedA[0], ownerA, now))
		require.Equal(t, []string{ids[0]}, res.Stale)
		b.requireState(t, herald.DeliveryInFlight, ids[0])

		res = b.complete(t, later, retried(cB, ownerB, later, later.Add(time.Minute)))
		require.Equal(t, 1, res.Applied)
		d := b.delivery(t, ids[0])
		require.Equal(t, herald.DeliveryPending, d.State)
		require.Equal(t, 1, d.Tier)
		require.Len(t, b.attempts(t, ids[0]), 2, "both attempts were made and both are recorded")
	})

	t.Run("MixedBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID, sub.ID, sub.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 3)
		byID := map[string]*store.ClaimedDelivery{}
		for _, c := range claimed {
			byID[c.Delivery.ID] = c
		}

		res := b.complete(t, now,
			delivered(byID[ids[0]], ownerA, now),
			retried(byID[ids[1]], ownerA, now, now.Add(time.Minute)),
			died(byID[ids[2]], ownerB, now), // not B's lease
		)
		require.Equal(t, 2, res.Applied)
		require.Equal(t, []string{ids[2]}, res.Stale)
		b.requireState(t, herald.DeliveryDelivered, ids[0])
		b.requireState(t, herald.DeliveryPending, ids[1])
		b.requireState(t, herald.DeliveryInFlight, ids[2])
	})

	t.Run("SameDeliveryTwiceInOneBatch", func(t *testing.T) {
		t.Parallel()
		// Outcomes apply in order: the second finds the lease gone and is
		// stale; both attempts are recorded.
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		res := b.complete(t, now,
			retried(c, ownerA, now, now.Add(time.Minute)),
			delivered(c, ownerA, now.Add(time.Second)),
		)
		require.Equal(t, 1, res.Applied)
		require.Equal(t, []string{ids[0]}, res.Stale)
		d := b.delivery(t, ids[0])
		require.Equal(t, herald.DeliveryPending, d.State)
		require.Equal(t, 1, d.Tier)
		require.Equal(t, 1, d.AttemptCount)
		require.Len(t, b.attempts(t, ids[0]), 2)
	})

	t.Run("LargeBatch", func(t *testing.T) {
		t.Parallel()
		// More outcomes than one statement carries (chunks of 250 on
		// SQLite), mixed applied and stale, in one call.
		b := setup(t, newStore)
		sub := b.createSub(t)
		const n = 600
		b.publishMany(t, n, sub.ID, func(int) time.Time { return now })
		var outcomes []store.DeliveryOutcome
		for len(outcomes) < n {
			claimed := b.claim(t, store.DeliveryClaimParams{Limit: 100})
			require.NotEmpty(t, claimed)
			for _, c := range claimed {
				owner := ownerA
				if len(outcomes)%3 == 0 {
					owner = ownerB // stale
				}
				outcomes = append(outcomes, delivered(c, owner, now))
			}
		}
		res := b.complete(t, now, outcomes...)
		require.Equal(t, n-n/3, res.Applied)
		require.Len(t, res.Stale, n/3)
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
		require.NoError(t, err)
		require.EqualValues(t, n-n/3, st.DeliveredTotal)
		require.EqualValues(t, n/3, st.Tiers[0].InFlight)
	})

	t.Run("DisableSubscriptions", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		gone := b.createSub(t)
		fine := b.createSub(t)
		_, ids := b.publish(t, now, gone.ID, gone.ID, fine.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 3)
		var c *store.ClaimedDelivery
		for _, cd := range claimed {
			if cd.Delivery.ID == ids[0] {
				c = cd
			}
		}
		// The other two go back to pending, as on a graceful shutdown.
		n, err := b.store.DeliveryRelease(b.ctx, &store.DeliveryReleaseParams{
			IDs: []string{ids[1], ids[2]}, LeaseOwner: ownerA, Now: now,
		})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		before := b.version(t)

		out := died(c, ownerA, now)
		out.Attempt.Status, out.Attempt.Error = 410, herald.ErrorGone
		res, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes:             []store.DeliveryOutcome{out},
			DisableSubscriptions: []store.SubscriptionDisable{{ID: gone.ID, Reason: "endpoint answered 410 Gone"}},
			Now:                  now.Add(time.Second),
		})
		require.NoError(t, err)
		require.Equal(t, 1, res.Applied)
		b.requireState(t, herald.DeliveryDead, c.Delivery.ID)

		got, err := b.store.SubscriptionGet(b.ctx, gone.ID)
		require.NoError(t, err)
		require.Equal(t, herald.SubscriptionDisabled, got.State)
		require.Equal(t, "endpoint answered 410 Gone", got.DisabledReason)
		require.Greater(t, b.version(t), before)

		// A second 410 (another delivery that was in flight) disables
		// nothing new: the subscription, and the version every fan-out
		// cache polls, are left alone.
		disabled := b.version(t)
		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			DisableSubscriptions: []store.SubscriptionDisable{{ID: gone.ID, Reason: "gone again"}},
			Now:                  now.Add(2 * time.Second),
		})
		require.NoError(t, err)
		require.Equal(t, disabled, b.version(t), "disabling twice bumps once")
		again, err := b.store.SubscriptionGet(b.ctx, gone.ID)
		require.NoError(t, err)
		requireSubscriptionEqual(t, got, again)

		// The disabled subscription's other delivery stays pending and is
		// not claimed; the healthy subscription's is.
		claimed = b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Minute)})
		require.Equal(t, []string{ids[2]}, claimedIDs(claimed))
		b.requireState(t, herald.DeliveryPending, ids[1])
	})

	t.Run("Events", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		alerts := b.createSub(t, func(s *herald.Subscription) { s.EventTypes = []string{"herald.*"} })
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])

		alert := newEvent(func(e *herald.Event) { e.Type = herald.EventTypeDeliveryDead })
		alertDelivery := herald.NewID(herald.PrefixDelivery)
		_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes: []store.DeliveryOutcome{died(c, ownerA, now)},
			Events: []store.EventInsert{{Event: alert, Deliveries: []store.DeliveryInsert{
				{ID: alertDelivery, SubscriptionID: alerts.ID, NextAttemptAt: now},
			}}},
			Now: now,
		})
		require.NoError(t, err)
		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: alert.ID})
		require.NoError(t, err)
		requireEventEqual(t, alert, got.Event)
		require.Equal(t, []string{alertDelivery}, deliveryIDs(got.Deliveries))
		require.Equal(t, []string{alertDelivery}, claimedIDs(b.claim(t, store.DeliveryClaimParams{})))

		// Same rules as EventInsertMany: a known id is a duplicate, not an
		// error, and creates nothing.
		dup := herald.NewID(herald.PrefixDelivery)
		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Events: []store.EventInsert{{Event: alert, Deliveries: []store.DeliveryInsert{
				{ID: dup, SubscriptionID: alerts.ID, NextAttemptAt: now},
			}}},
			Now: now,
		})
		require.NoError(t, err)
		_, err = b.store.DeliveryGet(b.ctx, dup)
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("AllOrNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		before := b.version(t)

		// The system event's two deliveries share an id: the whole call
		// fails, so the outcome and the disable are not applied either.
		twice := herald.NewID(herald.PrefixDelivery)
		_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes:             []store.DeliveryOutcome{died(c, ownerA, now)},
			DisableSubscriptions: []store.SubscriptionDisable{{ID: sub.ID, Reason: "gone"}},
			Events: []store.EventInsert{{Event: newEvent(), Deliveries: []store.DeliveryInsert{
				{ID: twice, SubscriptionID: sub.ID, NextAttemptAt: now},
				{ID: twice, SubscriptionID: sub.ID, NextAttemptAt: now},
			}}},
			Now: now,
		})
		require.Error(t, err)
		b.requireState(t, herald.DeliveryInFlight, ids[0])
		require.Empty(t, b.attempts(t, ids[0]))
		got, err := b.store.SubscriptionGet(b.ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, herald.SubscriptionEnabled, got.State)
		require.Equal(t, before, b.version(t))

		// The retry of the same batch without the bad event succeeds.
		res := b.complete(t, now, died(c, ownerA, now))
		require.Equal(t, 1, res.Applied)
	})
}
