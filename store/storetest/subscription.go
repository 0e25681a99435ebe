package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func testSubscription(t *testing.T, newStore NewStoreFunc) {
	t.Run("CreateGet", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		want := newSubscription(func(s *herald.Subscription) {
			s.Filter = &herald.Filter{ESQuery: json.RawMessage(`{"term":{"type":"bundle.indexed"}}`)}
			s.Ordering = herald.OrderingLatest
			s.RateLimit, s.MaxInFlight = &herald.RateLimit{Max: 10, PerSeconds: 1}, 4
		})
		created, err := b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{
			Subscription: want, Secret: "whsec_first", Now: now,
		})
		require.NoError(t, err)
		requireSubscriptionEqual(t, want, created)

		got, err := b.store.SubscriptionGet(b.ctx, want.ID)
		require.NoError(t, err)
		requireSubscriptionEqual(t, want, got)

		secrets, err := b.store.SubscriptionSecretList(b.ctx, want.ID)
		require.NoError(t, err)
		require.Len(t, secrets, 1)
		require.Equal(t, "whsec_first", secrets[0].Value)
		requireTimeEqual(t, now, secrets[0].CreatedAt)
		require.Nil(t, secrets[0].ExpiresAt)
	})

	t.Run("CreateMinimal", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// Optional fields absent: nothing is invented on the way back.
		want := newSubscription(func(s *herald.Subscription) {
			s.EventTypes, s.Filter, s.Headers, s.RateLimit, s.Metadata = nil, nil, nil, nil, nil
			s.KeyIntervalMS, s.MaxInFlight, s.TimeoutMS, s.Description = 0, 0, 0, ""
			s.Method = "PUT"
		})
		_, err := b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{Subscription: want, Secret: newSecret(), Now: now})
		require.NoError(t, err)
		got, err := b.store.SubscriptionGet(b.ctx, want.ID)
		require.NoError(t, err)
		requireSubscriptionEqual(t, want, got)
		require.Nil(t, got.RateLimit)
		require.True(t, got.Filter.IsZero())
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		missing := herald.NewID(herald.PrefixSubscription)

		_, err := b.store.SubscriptionGet(b.ctx, missing)
		require.ErrorIs(t, err, herald.ErrNotFound)
		_, err = b.store.SubscriptionSecretList(b.ctx, missing)
		require.ErrorIs(t, err, herald.ErrNotFound)
		_, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{
			Subscription: newSubscription(func(s *herald.Subscription) { s.ID = missing }), Now: now,
		})
		require.ErrorIs(t, err, herald.ErrNotFound)
		err = b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: missing, Now: now})
		require.ErrorIs(t, err, herald.ErrNotFound)
		err = b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: missing, NewSecret: newSecret(), GraceUntil: now.Add(time.Hour), Now: now,
		})
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("ListPaging", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		var ids []string
		for range 5 {
			ids = append(ids, b.createSub(t).ID)
		}
		slices.Sort(ids)

		page := func(after string, limit int) ([]string, bool) {
			t.Helper()
			res, err := b.store.SubscriptionList(b.ctx, &store.SubscriptionListParams{After: after, Limit: limit})
			require.NoError(t, err)
			var got []string
			for _, s := range res.Subscriptions {
				got = append(got, s.ID)
			}
			return got, res.More
		}
		got, more := page("", 2)
		require.Equal(t, ids[0:2], got)
		require.True(t, more)
		got, more = page(ids[1], 2)
		require.Equal(t, ids[2:4], got)
		require.True(t, more)
		got, more = page(ids[3], 2)
		require.Equal(t, ids[4:], got)
		require.False(t, more)

		// Limit 0 means the default page (100): everything here, no more.
		got, more = page("", 0)
		require.Equal(t, ids, got)
		require.False(t, more)

		// An exact fit has no further page.
		got, more = page("", 5)
		require.Equal(t, ids, got)
		require.False(t, more)

		// Deleted subscriptions are not listed.
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: ids[2], Now: now}))
		got, _ = page("", 0)
		require.Equal(t, []string{ids[0], ids[1], ids[3], ids[4]}, got)
	})

	t.Run("ListAll", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		enabled := b.createSub(t)
		disabled := b.createSub(t, func(s *herald.Subscription) {
			s.State, s.DisabledReason = herald.SubscriptionDisabled, "by hand"
		})
		deleted := b.createSub(t)
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: deleted.ID, Now: now}))

		res, err := b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		byID := map[string]*herald.Subscription{}
		for _, s := range res.Subscriptions {
			byID[s.ID] = s
		}
		require.Len(t, byID, 2, "enabled and disabled, not deleted")
		requireSubscriptionEqual(t, enabled, byID[enabled.ID])
		requireSubscriptionEqual(t, disabled, byID[disabled.ID])
		require.Equal(t, b.version(t), res.Version)
	})

	t.Run("Update", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		orig := b.createSub(t)

		later := now.Add(time.Hour)
		want := &herald.Subscription{
			ID:             orig.ID,
			URL:            "https://other.example.com/in",
			Method:         "PUT",
			EventTypes:     []string{"order.*"},
			Filter:         &herald.Filter{JMESPath: "data.size > `10`"},
			Headers:        map[string]string{"x-tenant": "b", "x-env": "prod"},
			Ordering:       herald.OrderingFIFO,
			KeyIntervalMS:  1000,
			RateLimit:      &herald.RateLimit{Max: 5, PerSeconds: 60},
			MaxInFlight:    1,
			TimeoutMS:      30_000,
			Description:    "changed",
			Metadata:       json.RawMessage(`{"team":"orders"}`),
			State:          herald.SubscriptionDisabled,
			DisabledReason: "paused by operator",
			// CreatedAt is not mutable: the stored one stays.
			CreatedAt: later,
			UpdatedAt: later,
		}
		got, err := b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: want, Now: later})
		require.NoError(t, err)
		want.CreatedAt = orig.CreatedAt
		requireSubscriptionEqual(t, want, got)
		got, err = b.store.SubscriptionGet(b.ctx, orig.ID)
		require.NoError(t, err)
		requireSubscriptionEqual(t, want, got)

		// Replacing means optional fields can be cleared.
		cleared := *want
		cleared.Filter, cleared.RateLimit, cleared.EventTypes, cleared.Headers, cleared.Metadata = nil, nil, nil, nil, nil
		cleared.State, cleared.DisabledReason = herald.SubscriptionEnabled, ""
		_, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: &cleared, Now: later})
		require.NoError(t, err)
		got, err = b.store.SubscriptionGet(b.ctx, orig.ID)
		require.NoError(t, err)
		requireSubscriptionEqual(t, &cleared, got)
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		other := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID, sub.ID, sub.ID, other.ID)
		pendingID, inFlightID, deliveredID, otherID := ids[0], ids[1], ids[2], ids[3]

		// Make one in flight and one delivered; the other subscription's
		// delivery is claimed too and must be left alone.
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 4)
		byID := map[string]*store.ClaimedDelivery{}
		for _, c := range claimed {
			byID[c.Delivery.ID] = c
		}
		res := b.complete(t, now, delivered(byID[deliveredID], ownerA, now))
		require.Equal(t, 1, res.Applied)
		n, err := b.store.DeliveryRelease(b.ctx, &store.DeliveryReleaseParams{
			IDs: []string{pendingID, otherID}, LeaseOwner: ownerA, Now: now,
		})
		require.NoError(t, err)
		require.Equal(t, 2, n)

		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: sub.ID, Now: now.Add(time.Second)}))

		_, err = b.store.SubscriptionGet(b.ctx, sub.ID)
		require.ErrorIs(t, err, herald.ErrNotFound)
		_, err = b.store.SubscriptionSecretList(b.ctx, sub.ID)
		require.ErrorIs(t, err, herald.ErrNotFound)
		err = b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: sub.ID, Now: now})
		require.ErrorIs(t, err, herald.ErrNotFound, "a second delete finds nothing")
		_, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: sub, Now: now})
		require.ErrorIs(t, err, herald.ErrNotFound)

		b.requireState(t, herald.DeliveryCancelled, pendingID, inFlightID)
		b.requireState(t, herald.DeliveryDelivered, deliveredID)
		b.requireState(t, herald.DeliveryPending, otherID)

		// The deleted subscription's deliveries are still readable.
		ev, err := b.store.DeliveryGet(b.ctx, pendingID)
		require.NoError(t, err)
		require.Equal(t, sub.ID, ev.Delivery.SubscriptionID)

		// The worker that held the in-flight one finds its outcome stale.
		res = b.complete(t, now, delivered(byID[inFlightID], ownerA, now))
		require.Equal(t, 0, res.Applied)
		require.Equal(t, []string{inFlightID}, res.Stale)
		b.requireState(t, herald.DeliveryCancelled, inFlightID)

		// Only the other subscription's delivery is claimable.
		require.Equal(t, []string{otherID}, claimedIDs(b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Minute)})))
	})

	t.Run("VersionBumps", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		last := b.version(t)
		bumped := func(what string) {
			t.Helper()
			v := b.version(t)
			require.Greater(t, v, last, "%s must bump the subscriptions version", what)
			last = v
		}

		sub := b.createSub(t)
		bumped("create")

		sub.Description = "new"
		_, err := b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: sub, Now: now})
		require.NoError(t, err)
		bumped("update")

		require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: newSecret(), GraceUntil: now.Add(time.Hour), Now: now,
		}))
		bumped("secret rotation")

		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			DisableSubscriptions: []store.SubscriptionDisable{{ID: sub.ID, Reason: "410"}}, Now: now,
		})
		require.NoError(t, err)
		bumped("disable")

		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: sub.ID, Now: now}))
		bumped("delete")

		// Reads and deliveries do not move it.
		_, err = b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		other := b.createSub(t)
		bumped("create")
		b.publish(t, now, other.ID)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{}), 1)
		require.Equal(t, last, b.version(t), "events and claims leave the version alone")
	})

	t.Run("SecretRotate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub, err := b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{
			Subscription: newSubscription(), Secret: "whsec_one", Now: now,
		})
		require.NoError(t, err)

		grace1 := now.Add(24 * time.Hour)
		require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: "whsec_two", GraceUntil: grace1, Now: now.Add(time.Minute),
		}))
		secrets, err := b.store.SubscriptionSecretList(b.ctx, sub.ID)
		require.NoError(t, err)
		require.Len(t, secrets, 2)
		require.Equal(t, "whsec_two", secrets[0].Value, "newest first")
		require.Nil(t, secrets[0].ExpiresAt)
		requireTimeEqual(t, now.Add(time.Minute), secrets[0].CreatedAt)
		require.Equal(t, "whsec_one", secrets[1].Value)
		requireTimePtrEqual(t, &grace1, secrets[1].ExpiresAt)

		// A second rotation expires "two" at the new grace but leaves "one"
		// at its earlier expiry.
		grace2 := now.Add(48 * time.Hour)
		require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: "whsec_three", GraceUntil: grace2, Now: now.Add(2 * time.Minute),
		}))
		secrets, err = b.store.SubscriptionSecretList(b.ctx, sub.ID)
		require.NoError(t, err)
		require.Len(t, secrets, 3)
		require.Equal(t, []string{"whsec_three", "whsec_two", "whsec_one"},
			[]string{secrets[0].Value, secrets[1].Value, secrets[2].Value})
		require.Nil(t, secrets[0].ExpiresAt)
		requireTimePtrEqual(t, &grace2, secrets[1].ExpiresAt)
		requireTimePtrEqual(t, &grace1, secrets[2].ExpiresAt)

		// A rotation with an immediate grace cuts every older secret off at
		// that time, including those that would have lived longer.
		cut := now.Add(3 * time.Minute)
		require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: "whsec_four", GraceUntil: cut, Now: cut,
		}))
		secrets, err = b.store.SubscriptionSecretList(b.ctx, sub.ID)
		require.NoError(t, err)
		require.Len(t, secrets, 4, "expired secrets are still listed")
		require.Nil(t, secrets[0].ExpiresAt)
		for _, s := range secrets[1:] {
			requireTimePtrEqual(t, &cut, s.ExpiresAt, s.Value)
		}
	})
}
