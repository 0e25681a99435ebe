package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Retention periods of the suite (the serve defaults).
const (
	keepDelivered = 72 * time.Hour
	keepDead      = 30 * 24 * time.Hour
	keepEvents    = 7 * 24 * time.Hour
)

func testRetention(t *testing.T, newStore NewStoreFunc) {
	sweep := func(t *testing.T, b *bundle, at time.Time, batch int) *store.RetentionSweepResult {
		t.Helper()
		res, err := b.store.RetentionSweep(b.ctx, &store.RetentionSweepParams{
			Delivered: keepDelivered, Dead: keepDead, Events: keepEvents, BatchSize: batch, Now: at,
		})
		require.NoError(t, err)
		return res
	}
	requireGone := func(t *testing.T, b *bundle, deliveryIDs ...string) {
		t.Helper()
		for _, id := range deliveryIDs {
			_, err := b.store.DeliveryGet(b.ctx, id)
			require.ErrorIs(t, err, herald.ErrNotFound, "delivery %s", id)
		}
	}
	requireEvent := func(t *testing.T, b *bundle, id string, kept bool) {
		t.Helper()
		_, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: id})
		if kept {
			require.NoError(t, err, "event %s", id)
		} else {
			require.ErrorIs(t, err, herald.ErrNotFound, "event %s", id)
		}
	}

	t.Run("DeletesOnlyWhatIsDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		doomed := b.createSub(t)

		// Finished at now: one delivered, one dead (with attempts).
		evDone, done := b.publish(t, now, sub.ID, sub.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 2)
		byID := map[string]*store.ClaimedDelivery{claimed[0].Delivery.ID: claimed[0], claimed[1].Delivery.ID: claimed[1]}
		b.complete(t, now, delivered(byID[done[0]], ownerA, now), died(byID[done[1]], ownerA, now))

		// Delivered later (2h after now).
		evLate, late := b.publish(t, now, sub.ID)
		lateC := b.claimOne(t, 0, ownerA, now, late[0])

		// In flight for ever (lease far ahead) and pending for ever: old
		// rows in the queue are never deleted, whatever their age.
		evQueue, queued := b.publish(t, now, sub.ID, sub.ID)
		inflight := b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseUntil: now.Add(365 * 24 * time.Hour)})
		require.Len(t, inflight, 1)

		// Cancelled at now (its subscription deleted while pending).
		evCancelled, cancelled := b.publish(t, now, doomed.ID)
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: doomed.ID, Now: now}))
		b.requireState(t, herald.DeliveryCancelled, cancelled[0])

		// An event nothing matched.
		evLonely, _ := b.publish(t, now)

		// The late one is delivered two hours on.
		b.complete(t, now.Add(2*time.Hour), delivered(lateC, ownerA, now.Add(2*time.Hour)))
		b.requireState(t, herald.DeliveryDelivered, late[0])

		// Right at the retention boundary nothing is deleted yet.
		got := sweep(t, b, now.Add(keepDelivered), 0)
		require.Equal(t, &store.RetentionSweepResult{}, got)

		// 73h later: the delivered one and the cancelled one go with their
		// attempts, and the deleted subscription with its last delivery;
		// the dead letter, the later delivery and the queue stay.
		got = sweep(t, b, now.Add(keepDelivered+time.Hour), 0)
		require.Equal(t, &store.RetentionSweepResult{Deliveries: 2, Subscriptions: 1}, got)
		requireGone(t, b, done[0], cancelled[0])
		b.requireState(t, herald.DeliveryDead, done[1])
		require.Len(t, b.attempts(t, done[1]), 1)
		b.requireState(t, herald.DeliveryDelivered, late[0])
		b.requireState(t, herald.DeliveryInFlight, inflight[0].Delivery.ID)
		for _, id := range queued {
			d := b.delivery(t, id)
			require.Contains(t, []herald.DeliveryState{herald.DeliveryPending, herald.DeliveryInFlight}, d.State)
		}
		// Events are younger than their retention: all kept.
		for _, id := range []string{evDone.ID, evLate.ID, evQueue.ID, evCancelled.ID, evLonely.ID} {
			requireEvent(t, b, id, true)
		}

		// 8 days later: the later delivery goes too; events with no
		// delivery left go (the cancelled one's, the lonely one, the late
		// one's); the dead letter keeps its event, and so does the queue.
		got = sweep(t, b, now.Add(keepEvents+24*time.Hour), 0)
		require.Equal(t, &store.RetentionSweepResult{Deliveries: 1, Events: 3}, got)
		requireGone(t, b, late[0])
		requireEvent(t, b, evCancelled.ID, false)
		requireEvent(t, b, evLonely.ID, false)
		requireEvent(t, b, evLate.ID, false)
		requireEvent(t, b, evDone.ID, true)
		requireEvent(t, b, evQueue.ID, true)
		b.requireState(t, herald.DeliveryDead, done[1])

		// 31 days later: the dead letter and then its event go. The queue
		// is still there, untouched.
		got = sweep(t, b, now.Add(keepDead+24*time.Hour), 0)
		require.Equal(t, &store.RetentionSweepResult{Dead: 1, Events: 1}, got)
		requireGone(t, b, done[1])
		requireEvent(t, b, evDone.ID, false)
		requireEvent(t, b, evQueue.ID, true)
		b.requireState(t, herald.DeliveryInFlight, inflight[0].Delivery.ID)
		for _, id := range queued {
			_, err := b.store.DeliveryGet(b.ctx, id)
			require.NoError(t, err)
		}
	})

	t.Run("DeadLettersOutliveDeliveredRetention", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ev, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		b.complete(t, now, died(c, ownerA, now))

		got := sweep(t, b, now.Add(10*keepDelivered), 0) // 30 days
		require.Equal(t, &store.RetentionSweepResult{}, got)
		b.requireState(t, herald.DeliveryDead, ids[0])
		requireEvent(t, b, ev.ID, true)
	})

	t.Run("Batches", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ids := b.publishMany(t, 5, sub.ID, func(int) time.Time { return now })
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 5)
		var outs []store.DeliveryOutcome
		for _, c := range claimed {
			outs = append(outs, delivered(c, ownerA, now))
		}
		b.complete(t, now, outs...)

		// Batches of 2: 2 + 2 + 1 deliveries, 2 + 2 + 1 events.
		got := sweep(t, b, now.Add(keepDead+time.Hour), 2)
		require.Equal(t, &store.RetentionSweepResult{Deliveries: 5, Events: 5}, got)
		requireGone(t, b, ids...)
		got = sweep(t, b, now.Add(keepDead+time.Hour), 2)
		require.Equal(t, &store.RetentionSweepResult{}, got)
	})

	t.Run("ZeroKeepsForever", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ev, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		b.complete(t, now, delivered(c, ownerA, now))
		res, err := b.store.RetentionSweep(b.ctx, &store.RetentionSweepParams{Now: now.Add(10 * 365 * 24 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, &store.RetentionSweepResult{}, res)
		b.requireState(t, herald.DeliveryDelivered, ids[0])
		requireEvent(t, b, ev.ID, true)
	})

	t.Run("RedrivenDeadLetterIsKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		b.complete(t, now, died(c, ownerA, now))
		// Retried long after: pending again, so no retention applies.
		_, err := b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: ids[0], Now: now.Add(keepDead + 2*time.Hour)})
		require.NoError(t, err)
		got := sweep(t, b, now.Add(2*keepDead), 0)
		require.Equal(t, &store.RetentionSweepResult{}, got)
		b.requireState(t, herald.DeliveryPending, ids[0])
	})

	t.Run("Leader", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// One store alone is always elected, and stays leader.
		ok, err := b.store.LeaderAttempt(b.ctx)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.LeaderAttempt(b.ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, b.store.LeaderRelease(b.ctx))
		require.NoError(t, b.store.LeaderRelease(b.ctx)) // not leader: no-op
		ok, err = b.store.LeaderAttempt(b.ctx)
		require.NoError(t, err)
		require.True(t, ok)
	})
}
