package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testDirect covers deliveries leased at insert (direct dispatch) and the
// fan-out cache inputs it relies on: secrets and pauses in
// SubscriptionListAll, and pauses bumping the pauses version (only).
func testDirect(t *testing.T, newStore NewStoreFunc) {
	// publishLeased stores one event with one delivery for subID, leased
	// to owner until until.
	publishLeased := func(t *testing.T, b *bundle, subID, owner string, until time.Time) (*herald.Event, string) {
		t.Helper()
		ev := newEvent()
		id := herald.NewID(herald.PrefixDelivery)
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: ev,
			Deliveries: []store.DeliveryInsert{{
				ID: id, SubscriptionID: subID, NextAttemptAt: now, LeaseOwner: owner, LeaseUntil: until,
			}},
		}}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{ID: ev.ID, DeliveryCount: 1}}, res)
		return ev, id
	}

	t.Run("LeasedInsertIsInFlightAndNotClaimed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, leased := publishLeased(t, b, sub.ID, ownerA, now.Add(time.Minute))
		_, pending := b.publish(t, now, sub.ID)

		d := b.delivery(t, leased)
		require.Equal(t, herald.DeliveryInFlight, d.State)
		require.Equal(t, 0, d.Tier)
		require.Equal(t, 0, d.AttemptCount)

		claimed := b.claim(t, store.DeliveryClaimParams{Tier: 0, LeaseOwner: ownerB})
		require.Equal(t, pending, claimedIDs(claimed), "a leased delivery is never claimed again")

		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
		require.NoError(t, err)
		require.EqualValues(t, 2, st.Tiers[0].InFlight)
	})

	t.Run("LeasedInsertCompletesUnderItsOwner", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, id := publishLeased(t, b, sub.ID, ownerA, now.Add(time.Minute))
		c := &store.ClaimedDelivery{Delivery: &herald.Delivery{ID: id, Tier: 0}, Attempt: 1}

		res := b.complete(t, now.Add(time.Second), delivered(c, ownerB, now.Add(time.Second)))
		require.Equal(t, []string{id}, res.Stale, "another owner's outcome is stale")
		b.requireState(t, herald.DeliveryInFlight, id)

		res = b.complete(t, now.Add(time.Second), delivered(c, ownerA, now.Add(time.Second)))
		require.Equal(t, 1, res.Applied)
		require.Empty(t, res.Stale)
		b.requireState(t, herald.DeliveryDelivered, id)
		require.Len(t, b.attempts(t, id), 2)
	})

	t.Run("ExpiredLeaseIsRescued", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		until := now.Add(time.Minute)
		_, id := publishLeased(t, b, sub.ID, ownerA, until)

		n, err := b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: until.Add(-time.Millisecond)})
		require.NoError(t, err)
		require.Zero(t, n, "a live lease is not rescued")

		at := until.Add(time.Second)
		n, err = b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: at})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.requireState(t, herald.DeliveryPending, id)
		b.claimOne(t, 0, ownerB, at, id)
	})

	t.Run("ReleaseMakesItPending", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, id := publishLeased(t, b, sub.ID, ownerA, now.Add(time.Minute))
		n, err := b.store.DeliveryRelease(b.ctx, &store.DeliveryReleaseParams{IDs: []string{id}, LeaseOwner: ownerA, Now: now})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.claimOne(t, 0, ownerB, now, id)
	})

	t.Run("DuplicateEventLeasesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ev, first := b.publish(t, now, sub.ID)
		again := herald.NewID(herald.PrefixDelivery)
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: newEvent(func(e *herald.Event) { e.ID = ev.ID }),
			Deliveries: []store.DeliveryInsert{{
				ID: again, SubscriptionID: sub.ID, NextAttemptAt: now, LeaseOwner: ownerA, LeaseUntil: now.Add(time.Minute),
			}},
		}}})
		require.NoError(t, err)
		require.True(t, res[0].Duplicate)
		_, err = b.store.DeliveryGet(b.ctx, again)
		require.ErrorIs(t, err, herald.ErrNotFound)
		b.requireState(t, herald.DeliveryPending, first...)
	})

	t.Run("ListAllCarriesSecretsAndPauses", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		other := b.createSub(t)
		require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: newSecret(), GraceUntil: now.Add(time.Hour), Now: now.Add(time.Second),
		}))
		want, err := b.store.SubscriptionSecretList(b.ctx, sub.ID)
		require.NoError(t, err)
		require.Len(t, want, 2)

		all, err := b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		require.Len(t, all.Secrets[sub.ID], 2)
		for i := range want {
			require.Equal(t, want[i].Value, all.Secrets[sub.ID][i].Value, "newest first")
			requireTimeEqual(t, want[i].CreatedAt, all.Secrets[sub.ID][i].CreatedAt)
			requireTimePtrEqual(t, want[i].ExpiresAt, all.Secrets[sub.ID][i].ExpiresAt)
		}
		require.Len(t, all.Secrets[other.ID], 1)
		require.Empty(t, all.PausedUntil)

		// A pause (from a completion) bumps the pauses version and shows in
		// the list.
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		before := b.versions(t)
		until := now.Add(time.Minute)
		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes:           []store.DeliveryOutcome{retried(c, ownerA, now, until)},
			PauseSubscriptions: []store.SubscriptionPause{{ID: sub.ID, Until: until}},
			Now:                now,
		})
		require.NoError(t, err)
		after := b.versions(t)
		require.Greater(t, after.Pauses, before.Pauses, "a pause bumps the pauses version")
		all, err = b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		require.Len(t, all.PausedUntil, 1)
		requireTimeEqual(t, until, all.PausedUntil[sub.ID])
		require.Equal(t, after.Subscriptions, all.Version)
		require.Equal(t, after.Pauses, all.PausesVersion)

		// Deleted subscriptions' secrets are left out.
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: other.ID, Now: now}))
		all, err = b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		require.NotContains(t, all.Secrets, other.ID)
	})
	// A pause is not a subscription change: it moves the pauses version
	// only, so fan-out caches reload the pauses (SubscriptionPauseList)
	// and not every subscription; a pause that moves nothing moves no
	// version.
	t.Run("PauseBumpsOnlyPausesVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		other := b.createSub(t)
		ids := b.publishMany(t, 2, sub.ID, spaced(now.Add(-time.Minute)))
		// Asked before the pause, so a store caching what kinds of
		// subscriptions exist has cached "none throttled".
		nextDue := func() *time.Time {
			t.Helper()
			next, err := b.store.DeliveryNextDue(b.ctx, &store.DeliveryNextDueParams{Tier: 0, Now: now})
			require.NoError(t, err)
			return next
		}
		requireTimeEqual(t, now.Add(-time.Minute), *nextDue())
		claimed := b.claim(t, store.DeliveryClaimParams{Limit: 1})
		require.Equal(t, ids[:1], claimedIDs(claimed))
		c := claimed[0]
		pauses, err := b.store.SubscriptionPauseList(b.ctx)
		require.NoError(t, err)
		require.Empty(t, pauses.PausedUntil)
		before := b.versions(t)
		require.Equal(t, before.Pauses, pauses.Version)

		// Two pauses of one subscription in one call: the later wins.
		until := now.Add(time.Minute)
		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes: []store.DeliveryOutcome{retried(c, ownerA, now, until)},
			PauseSubscriptions: []store.SubscriptionPause{
				{ID: sub.ID, Until: until}, {ID: sub.ID, Until: now.Add(time.Second)},
			},
			Now: now,
		})
		require.NoError(t, err)
		after := b.versions(t)
		require.Equal(t, before.Subscriptions, after.Subscriptions, "a pause leaves the subscriptions version alone")
		require.Greater(t, after.Pauses, before.Pauses, "a pause bumps the pauses version")

		pauses, err = b.store.SubscriptionPauseList(b.ctx)
		require.NoError(t, err)
		require.Equal(t, after.Pauses, pauses.Version)
		require.Len(t, pauses.PausedUntil, 1)
		requireTimeEqual(t, until, pauses.PausedUntil[sub.ID])
		all, err := b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		require.Equal(t, after.Subscriptions, all.Version)
		require.Equal(t, after.Pauses, all.PausesVersion)
		requireTimeEqual(t, until, all.PausedUntil[sub.ID])
		// The store's own view of throttled subscriptions saw it too.
		requireTimeEqual(t, until, *nextDue())

		// A pause ending no later than the current one changes nothing and
		// bumps nothing.
		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			PauseSubscriptions: []store.SubscriptionPause{{ID: sub.ID, Until: until}},
			Now:                now,
		})
		require.NoError(t, err)
		require.Equal(t, after, b.versions(t))

		// A second subscription's pause moves the pauses version again and
		// joins the list.
		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			PauseSubscriptions: []store.SubscriptionPause{{ID: other.ID, Until: until.Add(time.Minute)}},
			Now:                now,
		})
		require.NoError(t, err)
		last := b.versions(t)
		require.Equal(t, before.Subscriptions, last.Subscriptions)
		require.Greater(t, last.Pauses, after.Pauses)
		pauses, err = b.store.SubscriptionPauseList(b.ctx)
		require.NoError(t, err)
		require.Equal(t, last.Pauses, pauses.Version)
		require.Len(t, pauses.PausedUntil, 2)
		requireTimeEqual(t, until.Add(time.Minute), pauses.PausedUntil[other.ID])

		// Deleted subscriptions' pauses are left out.
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: other.ID, Now: now}))
		pauses, err = b.store.SubscriptionPauseList(b.ctx)
		require.NoError(t, err)
		require.NotContains(t, pauses.PausedUntil, other.ID)
		require.Contains(t, pauses.PausedUntil, sub.ID)
	})
}
