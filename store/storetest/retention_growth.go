package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// OrphanAttemptPlanter is implemented, in the backend's own tests only, by
// a store that can hold an attempt row for a delivery that does not exist
// (herald on PostgreSQL recorded such rows before DeliveryCompleteMany
// refused to; a SQLite file edited with foreign keys off can hold them).
// The retention suite plants some to prove the sweep removes them.
type OrphanAttemptPlanter interface {
	// AttemptPlantOrphan stores one attempt for deliveryID, which names no
	// delivery.
	AttemptPlantOrphan(ctx context.Context, deliveryID string) error
}

// testRetentionGrowth covers the tables retention keeps bounded besides
// deliveries and events (store/retention.go): per-key ordering state,
// deleted subscriptions, rotated-out secrets and orphan attempts.
func testRetentionGrowth(t *testing.T, newStore NewStoreFunc) {
	keep := store.RetentionSweepParams{Delivered: keepDelivered, Dead: keepDead, Events: keepEvents}
	sweepWith := func(t *testing.T, b *bundle, params store.RetentionSweepParams, at time.Time) *store.RetentionSweepResult {
		t.Helper()
		params.Now = at
		res, err := b.store.RetentionSweep(b.ctx, &params)
		require.NoError(t, err)
		return res
	}
	sweep := func(t *testing.T, b *bundle, at time.Time) *store.RetentionSweepResult {
		t.Helper()
		return sweepWith(t, b, keep, at)
	}

	t.Run("LatestKeyStateLivesAsLongAsEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingLatest, 0)
		other := b.createOrderedSub(t, herald.OrderingLatest, 0)

		// Version 5 of k is sent at sent (the key's last send).
		sent := now.Add(time.Second)
		v5 := b.publishKeyed(t, now, sub.ID, "k", ptr[int64](5))
		c := b.claimOne(t, 0, ownerA, sent, v5)
		b.complete(t, sent, delivered(c, ownerA, sent))
		// Another subscription's key, sent later, stays throughout.
		late := sent.Add(keepEvents)
		o1 := b.publishKeyed(t, late, other.ID, "k", ptr[int64](1))
		co := b.claimOne(t, 0, ownerA, late, o1)
		b.complete(t, late, delivered(co, ownerA, late))

		// Within the Events retention of the last send, the state stays and
		// an older version published now is still skipped.
		inside := sent.Add(keepEvents)
		require.Zero(t, sweep(t, b, inside).Keys)
		v3 := b.publishKeyed(t, inside, sub.ID, "k", ptr[int64](3))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: inside}))
		b.requireState(t, herald.DeliverySkipped, v3)

		// Past it, with no delivery of the key pending, the state goes.
		past := inside.Add(time.Millisecond)
		require.Equal(t, 1, sweep(t, b, past).Keys)
		require.Zero(t, sweep(t, b, past).Keys, "nothing left to delete")

		// A version published after that is compared with nothing: it is
		// sent (the documented end of the Events window), and the key
		// starts over from it.
		v4 := b.publishKeyed(t, past, sub.ID, "k", ptr[int64](4))
		c4 := b.claimOne(t, 0, ownerA, past, v4)
		b.complete(t, past, delivered(c4, ownerA, past))
		v2 := b.publishKeyed(t, past, sub.ID, "k", ptr[int64](2))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: past}))
		b.requireState(t, herald.DeliverySkipped, v2)

		// The other subscription's key kept its state all along.
		o0 := b.publishKeyed(t, past, other.ID, "k", ptr[int64](0))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: past}))
		b.requireState(t, herald.DeliverySkipped, o0)
	})

	t.Run("KeyStateKeptWhileTheKeyHasWork", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingFIFO, 0)
		d1 := b.publishKeyed(t, now, sub.ID, "k", nil)
		d2 := b.publishKeyed(t, now.Add(time.Millisecond), sub.ID, "k", nil)
		held := b.publishKeyed(t, now, sub.ID, "held", nil)

		// d1 is delivered; d2 waits, pending, for months; "held" is in
		// flight under a lease that outlives every sweep below.
		claimed := b.claim(t, store.DeliveryClaimParams{LeaseUntil: now.Add(365 * 24 * time.Hour)})
		require.ElementsMatch(t, []string{d1, held}, claimedIDs(claimed))
		b.complete(t, now, delivered(claimedByID(claimed, d1), ownerA, now))

		far := now.Add(2 * keepDead)
		require.Zero(t, sweep(t, b, far).Keys, "a key with a pending delivery or held keeps its state")
		c2 := b.claimOne(t, 0, ownerA, far, d2)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: far}), "k is held by d2 again")

		// Once both are done the two keys go, one Events retention after
		// their last send.
		b.complete(t, far, delivered(c2, ownerA, far))
		b.complete(t, far, delivered(claimedByID(claimed, held), ownerA, far))
		require.Equal(t, 1, sweep(t, b, far.Add(keepEvents)).Keys, "only held, last sent long ago")
		require.Equal(t, 1, sweep(t, b, far.Add(keepEvents+time.Millisecond)).Keys)
	})

	t.Run("KeyStateKeptUntilTheKeyIntervalRunsOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// A key interval longer than the Events retention.
		sub := b.createOrderedSub(t, herald.OrderingFIFO, (2 * time.Hour).Milliseconds())
		short := store.RetentionSweepParams{Events: time.Hour}
		d1 := b.publishKeyed(t, now, sub.ID, "k", nil)
		c1 := b.claimOne(t, 0, ownerA, now, d1)
		b.complete(t, now, delivered(c1, ownerA, now))

		require.Zero(t, sweepWith(t, b, short, now.Add(90*time.Minute)).Keys, "the interval still runs")
		d2 := b.publishKeyed(t, now.Add(90*time.Minute), sub.ID, "k", nil)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: now.Add(90 * time.Minute)}), "spaced by the interval")
		c2 := b.claimOne(t, 0, ownerA, now.Add(2*time.Hour), d2)
		b.complete(t, now.Add(2*time.Hour), delivered(c2, ownerA, now.Add(2*time.Hour)))

		require.Zero(t, sweepWith(t, b, short, now.Add(3*time.Hour)).Keys)
		require.Equal(t, 1, sweepWith(t, b, short, now.Add(4*time.Hour)).Keys)
	})

	t.Run("DeletedSubscriptionKeyStateGoesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingLatest, 0)
		done := b.publishKeyed(t, now, sub.ID, "done", ptr[int64](1))
		inflight := b.publishKeyed(t, now, sub.ID, "inflight", ptr[int64](1))
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.ElementsMatch(t, []string{done, inflight}, claimedIDs(claimed))
		b.complete(t, now, delivered(claimedByID(claimed, done), ownerA, now))
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: sub.ID, Now: now}))

		// Whatever the retention (none here), both keys go, the held one
		// too: nothing claims a deleted subscription's deliveries. (Batches
		// of one: the scan resumes after a deleted row.)
		got := sweepWith(t, b, store.RetentionSweepParams{BatchSize: 1}, now.Add(time.Second))
		require.Equal(t, &store.RetentionSweepResult{Keys: 2}, got)
		// The in-flight attempt still ends without an error.
		res := b.complete(t, now.Add(time.Second), delivered(claimedByID(claimed, inflight), ownerA, now.Add(time.Second)))
		require.Equal(t, []string{inflight}, res.Stale)
	})

	t.Run("DeletedSubscriptionGoesWithItsLastDelivery", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		live := b.createSub(t)
		empty := b.createSub(t)
		withDelivered := b.createSub(t)
		withDead := b.createSub(t)
		_, ids := b.publish(t, now, withDelivered.ID, withDead.ID, live.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 3)
		b.complete(t, now,
			delivered(claimedByID(claimed, ids[0]), ownerA, now),
			died(claimedByID(claimed, ids[1]), ownerA, now),
			delivered(claimedByID(claimed, ids[2]), ownerA, now))
		for _, id := range []string{empty.ID, withDelivered.ID, withDead.ID} {
			require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: id, Now: now}))
		}

		// Deleted exactly the Delivered retention ago: kept.
		got := sweep(t, b, now.Add(keepDelivered))
		require.Zero(t, got.Subscriptions)

		// Past it: the delivered delivery goes, and with it the last reason
		// to keep its subscription; the one never used goes too. The one
		// with a dead letter stays as long as the dead letter.
		got = sweep(t, b, now.Add(keepDelivered+time.Hour))
		require.Equal(t, 2, got.Deliveries, "withDelivered's and live's")
		require.Equal(t, 2, got.Subscriptions)
		require.Zero(t, sweep(t, b, now.Add(keepDelivered+time.Hour)).Subscriptions)
		b.requireState(t, herald.DeliveryDead, ids[1])

		got = sweep(t, b, now.Add(keepDead+time.Hour))
		require.Equal(t, 1, got.Dead)
		require.Equal(t, 1, got.Subscriptions)

		// A live subscription is never removed, however old and idle.
		got = sweep(t, b, now.Add(10*keepDead))
		require.Zero(t, got.Subscriptions)
		_, err := b.store.SubscriptionGet(b.ctx, live.ID)
		require.NoError(t, err)
		secrets, err := b.store.SubscriptionSecretList(b.ctx, live.ID)
		require.NoError(t, err)
		require.Len(t, secrets, 1, "its only secret stays")
	})

	t.Run("RotatedOutSecretsGo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub, err := b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{
			Subscription: newSubscription(), Secret: "whsec_one", Now: now,
		})
		require.NoError(t, err)
		rotate := func(secret string, at, grace time.Time) {
			require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
				ID: sub.ID, NewSecret: secret, GraceUntil: grace, Now: at,
			}))
		}
		values := func() []string {
			secrets, err := b.store.SubscriptionSecretList(b.ctx, sub.ID)
			require.NoError(t, err)
			var out []string
			for _, s := range secrets {
				out = append(out, s.Value)
			}
			return out
		}
		// one expires at +1h, two at +3h; three is current.
		rotate("whsec_two", now, now.Add(time.Hour))
		rotate("whsec_three", now.Add(2*time.Hour), now.Add(3*time.Hour))

		// Expired exactly the Delivered retention ago: kept.
		require.Zero(t, sweep(t, b, now.Add(time.Hour+keepDelivered)).Secrets)
		require.Equal(t, []string{"whsec_three", "whsec_two", "whsec_one"}, values())

		require.Equal(t, 1, sweep(t, b, now.Add(2*time.Hour+keepDelivered)).Secrets)
		require.Equal(t, []string{"whsec_three", "whsec_two"}, values())

		// Long after, only the current secret is left, whatever its age.
		require.Equal(t, 1, sweep(t, b, now.Add(10*keepDead)).Secrets)
		require.Equal(t, []string{"whsec_three"}, values())

		// Delivered retention 0 keeps them all.
		rotate("whsec_four", now.Add(3*time.Hour), now.Add(3*time.Hour))
		require.Zero(t, sweepWith(t, b, store.RetentionSweepParams{Dead: keepDead, Events: keepEvents}, now.Add(10*keepDead)).Secrets)
		require.Equal(t, []string{"whsec_four", "whsec_three"}, values())
	})

	t.Run("OrphanAttemptsGo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		planter, ok := b.store.(OrphanAttemptPlanter)
		require.True(t, ok, "the backend's tests must give the store AttemptPlantOrphan (storetest.OrphanAttemptPlanter)")
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID, sub.ID)
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 2)
		b.complete(t, now, retried(claimedByID(claimed, ids[0]), ownerA, now, now.Add(time.Minute)),
			delivered(claimedByID(claimed, ids[1]), ownerA, now))

		// Orphans sort before, between and after the real deliveries' ids.
		orphans := []string{"a_orphan", ids[0] + "x", "z_orphan"}
		for _, id := range orphans {
			require.NoError(t, planter.AttemptPlantOrphan(b.ctx, id))
		}
		require.NoError(t, planter.AttemptPlantOrphan(b.ctx, orphans[0])) // two attempts

		// No retention is due (and none is set for the first sweep): only
		// the orphans go, in batches of 1.
		got := sweepWith(t, b, store.RetentionSweepParams{BatchSize: 1}, now)
		require.Equal(t, &store.RetentionSweepResult{Attempts: 4}, got)
		require.Equal(t, &store.RetentionSweepResult{}, sweep(t, b, now))
		require.Len(t, b.attempts(t, ids[0]), 1)
		require.Len(t, b.attempts(t, ids[1]), 1)

		// A delivery stored under an orphan's id later has no attempt.
		_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: newEvent(), Deliveries: []store.DeliveryInsert{{ID: orphans[2], SubscriptionID: sub.ID, NextAttemptAt: now}},
		}}})
		require.NoError(t, err)
		require.Empty(t, b.attempts(t, orphans[2]))
	})
}
