package storetest

import (
	"encoding/json"
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

		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: evA.ID, Tenant: "acme"})
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

// testTenantEventKey: an event id is unique within its tenant (issue 20).
// Two tenants publishing the same id both get stored; each tenant's retry
// is a duplicate within its own tenant only, answered with its own figures.
func testTenantEventKey(t *testing.T, newStore NewStoreFunc) {
	t.Run("SameIDAcrossTenants", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		acme := b.createSub(t, func(s *herald.Subscription) { s.Tenant = "acme" })
		globex1 := b.createSub(t, func(s *herald.Subscription) { s.Tenant = "globex" })
		globex2 := b.createSub(t, func(s *herald.Subscription) { s.Tenant = "globex" })
		const id = "order-1002"
		insert := func(tenant string, subs ...string) store.EventInsert {
			ev := newEvent(func(e *herald.Event) {
				e.ID, e.Tenant = id, tenant
				e.Data = json.RawMessage(`{"tenant":"` + tenant + `"}`)
			})
			in := store.EventInsert{Event: ev}
			for _, sub := range subs {
				in.Deliveries = append(in.Deliveries, store.DeliveryInsert{
					ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub, NextAttemptAt: now,
				})
			}
			return in
		}
		publish := func(ins ...store.EventInsert) []store.EventInsertResult {
			t.Helper()
			res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: ins, Now: now})
			require.NoError(t, err)
			return res
		}

		// acme first, then globex in another call and the untenanted space
		// in the same call as a retry of acme's.
		a := insert("acme", acme.ID)
		require.Equal(t, []store.EventInsertResult{{ID: id, DeliveryCount: 1}}, publish(a))
		g := insert("globex", globex1.ID, globex2.ID)
		u := insert("")
		require.Equal(t, []store.EventInsertResult{
			{ID: id, DeliveryCount: 2},
			{ID: id, Duplicate: true, DeliveryCount: 1},
			{ID: id},
		}, publish(g, insert("acme", acme.ID), u), "globex and untenanted stored; acme's retry a duplicate with acme's count")

		// Each retry is a duplicate in its own tenant, with its own count.
		require.Equal(t, []store.EventInsertResult{
			{ID: id, Duplicate: true, DeliveryCount: 2},
			{ID: id, Duplicate: true},
			{ID: id, Duplicate: true, DeliveryCount: 1},
		}, publish(insert("globex", globex1.ID), insert(""), insert("acme", acme.ID)))

		// EventGet reads within a tenant; with AnyTenant an id held by
		// several tenants is a conflict naming them.
		for tenant, want := range map[string]store.EventInsert{"acme": a, "globex": g, "": u} {
			got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: id, Tenant: tenant})
			require.NoError(t, err, "tenant %q", tenant)
			requireEventEqual(t, want.Event, got.Event)
			require.ElementsMatch(t, deliveryInsertIDs(want.Deliveries), deliveryIDs(got.Deliveries), "tenant %q", tenant)
			for _, d := range got.Deliveries {
				require.Equal(t, tenant, d.EventTenant)
			}
		}
		_, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: id, Tenant: "initech"})
		require.ErrorIs(t, err, herald.ErrNotFound)
		_, err = b.store.EventGet(b.ctx, &store.EventGetParams{ID: id, AnyTenant: true})
		var he *herald.Error
		require.ErrorAs(t, err, &he)
		require.Equal(t, herald.CodeConflict, he.Code)
		require.Contains(t, he.Message, "acme")
		require.Contains(t, he.Message, "globex")
		lone := newEvent(func(e *herald.Event) { e.Tenant = "acme" })
		publish(store.EventInsert{Event: lone})
		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: lone.ID, AnyTenant: true})
		require.NoError(t, err)
		require.Equal(t, "acme", got.Event.Tenant)

		// Claims carry each delivery's own tenant's event.
		claimed := b.claim(t, store.DeliveryClaimParams{Tier: 0})
		require.Len(t, claimed, 3)
		for _, c := range claimed {
			require.Equal(t, id, c.Event.ID)
			require.Equal(t, c.Delivery.EventTenant, c.Event.Tenant)
			require.JSONEq(t, `{"tenant":"`+c.Event.Tenant+`"}`, string(c.Event.Data))
			sub, err := b.store.SubscriptionGet(b.ctx, c.Delivery.SubscriptionID)
			require.NoError(t, err)
			require.Equal(t, sub.Tenant, c.Event.Tenant)
		}
	})
}

func deliveryInsertIDs(ds []store.DeliveryInsert) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
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
