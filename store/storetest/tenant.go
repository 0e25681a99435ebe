package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func testTenant(t *testing.T, newStore NewStoreFunc) {
	t.Run("SubscriptionTenantStoredAndListed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		a := b.createSub(t, func(s *herald.Subscription) { s.Tenant = "acme" })
		other := b.createSub(t, func(s *herald.Subscription) { s.Tenant = "globex" })
		audit := b.createSub(t, func(s *herald.Subscription) { s.AllTenants = true })
		require.Equal(t, "acme", a.Tenant)
		require.True(t, audit.AllTenants)

		got, err := b.store.SubscriptionGet(b.ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, "acme", got.Tenant)
		require.False(t, got.AllTenants)

		list, err := b.store.SubscriptionList(b.ctx, &store.SubscriptionListParams{Tenant: "acme"})
		require.NoError(t, err)
		require.Len(t, list.Subscriptions, 1)
		require.Equal(t, a.ID, list.Subscriptions[0].ID)
		all, err := b.store.SubscriptionList(b.ctx, &store.SubscriptionListParams{})
		require.NoError(t, err)
		require.Len(t, all.Subscriptions, 3)

		// The fan-out cache loads tenancy with everything else, and an
		// update (which writes every mutable field) leaves it alone.
		loaded, err := b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		byID := map[string]*herald.Subscription{}
		for _, s := range loaded.Subscriptions {
			byID[s.ID] = s
		}
		require.Equal(t, "globex", byID[other.ID].Tenant)
		require.True(t, byID[audit.ID].AllTenants)
		got.Description = "changed"
		got.Tenant = "ignored"
		upd, err := b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: got, Now: now})
		require.NoError(t, err)
		require.Equal(t, "acme", upd.Tenant, "tenant is fixed at creation")
	})

	t.Run("EventsDeliveriesDeadLettersByTenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		a := b.createSub(t, func(s *herald.Subscription) { s.Tenant = "acme" })
		g := b.createSub(t, func(s *herald.Subscription) { s.Tenant = "globex" })
		insert := func(tenant, subID string) (*herald.Event, string) {
			ev := newEvent(func(e *herald.Event) { e.Tenant = tenant })
			id := herald.NewID(herald.PrefixDelivery)
			_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
				Event: ev, Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: subID, NextAttemptAt: now}},
			}}})
			require.NoError(t, err)
			return ev, id
		}
		evA, dA := insert("acme", a.ID)
		_, dG := insert("globex", g.ID)

		got, err := b.store.EventGet(b.ctx, evA.ID)
		require.NoError(t, err)
		require.Equal(t, "acme", got.Event.Tenant)
		events, err := b.store.EventList(b.ctx, &store.EventListParams{Tenant: "acme"})
		require.NoError(t, err)
		require.Len(t, events.Events, 1)
		require.Equal(t, evA.ID, events.Events[0].ID)
		require.Equal(t, "acme", events.Events[0].Tenant)

		dl, err := b.store.DeliveryList(b.ctx, &store.DeliveryListParams{Tenant: "globex"})
		require.NoError(t, err)
		require.Len(t, dl.Deliveries, 1)
		require.Equal(t, dG, dl.Deliveries[0].ID)

		// Claimed deliveries carry the event's tenant (it is in the body).
		claimed := b.claim(t, store.DeliveryClaimParams{Tier: 0})
		require.Len(t, claimed, 2)
		tenants := map[string]string{}
		for _, c := range claimed {
			tenants[c.Delivery.ID] = c.Event.Tenant
		}
		require.Equal(t, map[string]string{dA: "acme", dG: "globex"}, tenants)
		for _, c := range claimed {
			b.complete(t, now, died(c, ownerA, now))
		}
		groups, err := b.store.DeadLetterGroupList(b.ctx, &store.DeadLetterGroupListParams{Tenant: "acme"})
		require.NoError(t, err)
		require.Len(t, groups, 1)
		require.Equal(t, a.ID, groups[0].SubscriptionID)
		stats, err := b.store.SubscriptionStatsList(b.ctx, &store.SubscriptionStatsListParams{Since: now.Add(-time.Hour), Tenant: "globex"})
		require.NoError(t, err)
		require.Len(t, stats, 1)
		require.Equal(t, g.ID, stats[0].SubscriptionID)
		require.Equal(t, 1, stats[0].Dead)
	})
}

func testAPITokenScoped(t *testing.T, newStore NewStoreFunc) {
	t.Run("CreateGetListDelete", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// A token stored the old way is an admin token with a derived id.
		require.NoError(t, b.store.APITokenCreate(b.ctx, &store.APITokenCreateParams{Hash: "00112233445566778899aabbccddeeff", Now: now}))
		admin, err := b.store.APITokenGet(b.ctx, "00112233445566778899aabbccddeeff")
		require.NoError(t, err)
		require.Equal(t, "tok_00112233445566778899aabbcc", admin.ID)
		require.Equal(t, []string{"admin"}, admin.Scopes)
		require.Empty(t, admin.Tenant)
		require.Nil(t, admin.ExpiresAt)

		exp := now.Add(time.Hour)
		require.NoError(t, b.store.APITokenCreate(b.ctx, &store.APITokenCreateParams{
			Hash: "ffee", ID: "tok_scoped", Name: "acme publisher", Scopes: []string{"events:publish", "events:read"},
			Tenant: "acme", ExpiresAt: &exp, Now: now.Add(time.Second),
		}))
		tok, err := b.store.APITokenGet(b.ctx, "ffee")
		require.NoError(t, err)
		require.Equal(t, "tok_scoped", tok.ID)
		require.Equal(t, "ffee", tok.Hash)
		require.Equal(t, "acme publisher", tok.Name)
		require.Equal(t, []string{"events:publish", "events:read"}, tok.Scopes)
		require.Equal(t, "acme", tok.Tenant)
		requireTimePtrEqual(t, &exp, tok.ExpiresAt)
		requireTimeEqual(t, now.Add(time.Second), tok.CreatedAt)

		list, err := b.store.APITokenList(b.ctx)
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, admin.ID, list[0].ID)
		require.Equal(t, "tok_scoped", list[1].ID)

		require.NoError(t, b.store.APITokenDelete(b.ctx, "tok_scoped"))
		_, err = b.store.APITokenGet(b.ctx, "ffee")
		require.ErrorIs(t, err, herald.ErrNotFound)
		require.ErrorIs(t, b.store.APITokenDelete(b.ctx, "tok_scoped"), herald.ErrNotFound)
		_, err = b.store.APITokenGet(b.ctx, "nope")
		require.ErrorIs(t, err, herald.ErrNotFound)
	})
}
