package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testDeliveryOutcome covers the outcome rules every backend shares
// (store/complete.go): invalid outcomes are refused with a non-transient
// error, and an outcome for a delivery that does not exist records nothing.
func testDeliveryOutcome(t *testing.T, newStore NewStoreFunc) {
	t.Run("InvalidOutcomeRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID, sub.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 2)
		good, victim := claimedByID(claimed, ids[0]), claimedByID(claimed, ids[1])
		next := now.Add(time.Minute)

		for _, tt := range []struct {
			name string
			bad  func(o *store.DeliveryOutcome)
		}{
			{"StateInFlight", func(o *store.DeliveryOutcome) { o.State = herald.DeliveryInFlight }},
			{"StateSkipped", func(o *store.DeliveryOutcome) { o.State = herald.DeliverySkipped }},
			{"StateSuperseded", func(o *store.DeliveryOutcome) { o.State = herald.DeliverySuperseded }},
			{"StateCancelled", func(o *store.DeliveryOutcome) { o.State = herald.DeliveryCancelled }},
			{"StateUnknown", func(o *store.DeliveryOutcome) { o.State = "bogus" }},
			{"StateEmpty", func(o *store.DeliveryOutcome) { o.State = "" }},
			{"PendingWithoutNextAttempt", func(o *store.DeliveryOutcome) {
				o.State, o.Tier, o.NextAttemptAt = herald.DeliveryPending, 1, nil
			}},
			{"PendingWithZeroNextAttempt", func(o *store.DeliveryOutcome) {
				o.State, o.Tier, o.NextAttemptAt = herald.DeliveryPending, 1, &time.Time{}
			}},
			{"DeliveredWithNextAttempt", func(o *store.DeliveryOutcome) { o.NextAttemptAt = &next }},
			{"DeadWithNextAttempt", func(o *store.DeliveryOutcome) { o.State, o.NextAttemptAt = herald.DeliveryDead, &next }},
			{"NoDeliveryID", func(o *store.DeliveryOutcome) { o.DeliveryID = "" }},
			{"NoLeaseOwner", func(o *store.DeliveryOutcome) { o.LeaseOwner = "" }},
			{"NegativeTier", func(o *store.DeliveryOutcome) { o.Tier = -1 }},
			{"NegativeAttemptTier", func(o *store.DeliveryOutcome) { o.Attempt.Tier = -1 }},
			{"AttemptNumberZero", func(o *store.DeliveryOutcome) { o.Attempt.N = 0 }},
		} {
			bad := delivered(victim, ownerA, now)
			tt.bad(&bad)
			_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
				Outcomes: []store.DeliveryOutcome{delivered(good, ownerA, now), bad},
				Now:      now,
			})
			require.ErrorIs(t, err, store.ErrOutcomeInvalid, tt.name)
			require.NotErrorIs(t, err, herald.ErrStoreUnavailable, "%s: a bad outcome is not a store outage", tt.name)
			var oe *store.OutcomeError
			require.True(t, errors.As(err, &oe), tt.name)
			require.Equal(t, 1, oe.Index, "%s: the error names the bad outcome", tt.name)
			require.Equal(t, bad.DeliveryID, oe.DeliveryID, tt.name)

			// Nothing was applied, not even the good outcome.
			for _, id := range ids {
				d := b.delivery(t, id)
				require.Equal(t, herald.DeliveryInFlight, d.State, "%s: %s", tt.name, id)
				require.Zero(t, d.AttemptCount, tt.name)
				require.Empty(t, b.attempts(t, id), tt.name)
			}
		}

		// The batch without the bad outcome applies.
		res := b.complete(t, now, delivered(good, ownerA, now), retried(victim, ownerA, now, next))
		require.Equal(t, 2, res.Applied)
		b.requireState(t, herald.DeliveryDelivered, ids[0])
		b.requireState(t, herald.DeliveryPending, ids[1])
	})

	t.Run("MissingDeliveryRecordsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID, sub.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 2)
		c0, c1 := claimedByID(claimed, ids[0]), claimedByID(claimed, ids[1])

		// An outcome for an id no delivery has, between a stale one and a
		// good one: the call succeeds, both others are handled, and the
		// missing one is stale (Stale in input order).
		missing := herald.NewID(herald.PrefixDelivery)
		ghost := &store.ClaimedDelivery{Delivery: &herald.Delivery{ID: missing}, Attempt: 1}
		res := b.complete(t, now,
			delivered(c1, ownerB, now), // not B's lease
			delivered(ghost, ownerA, now),
			delivered(c0, ownerA, now))
		require.Equal(t, 1, res.Applied)
		require.Equal(t, []string{ids[1], missing}, res.Stale)
		b.requireState(t, herald.DeliveryDelivered, ids[0])
		require.Len(t, b.attempts(t, ids[1]), 1, "a stale outcome of an existing delivery records its attempt")

		// No attempt was stored under the missing id: a delivery stored
		// under it afterwards has none, and retention finds no orphan.
		_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: newEvent(), Deliveries: []store.DeliveryInsert{{ID: missing, SubscriptionID: sub.ID, NextAttemptAt: now}},
		}}})
		require.NoError(t, err)
		require.Empty(t, b.attempts(t, missing))
	})

	t.Run("LateOutcomeOfSweptDeliveryRecordsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		// Its subscription is deleted while it is in flight (cancelled),
		// and retention deletes it before the attempt ends.
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: sub.ID, Now: now}))
		later := now.Add(keepDelivered + time.Hour)
		got, err := b.store.RetentionSweep(b.ctx, &store.RetentionSweepParams{Delivered: keepDelivered, Now: later})
		require.NoError(t, err)
		require.Equal(t, 1, got.Deliveries)

		res := b.complete(t, later, delivered(c, ownerA, later))
		require.Zero(t, res.Applied)
		require.Equal(t, []string{ids[0]}, res.Stale)
		got, err = b.store.RetentionSweep(b.ctx, &store.RetentionSweepParams{Delivered: keepDelivered, Now: later})
		require.NoError(t, err)
		require.Zero(t, got.Attempts, "no orphan attempt was left to sweep")
	})
}
