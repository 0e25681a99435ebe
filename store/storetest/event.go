package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func testEvent(t *testing.T, newStore NewStoreFunc) {
	t.Run("InsertGet", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		subA, subB := b.createSub(t), b.createSub(t)

		keyed := newEvent(func(e *herald.Event) {
			e.Key, e.Version = "bundle-7", ptr(int64(7))
			e.Data = json.RawMessage(`{"size":42,"tags":["a","b"],"nested":{"x":null}}`)
		})
		plain := newEvent(func(e *herald.Event) { e.Type = "user.created" })
		due := now.Add(5 * time.Second)
		dA, dB, dC := herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery)

		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			{Event: keyed, Deliveries: []store.DeliveryInsert{
				{ID: dA, SubscriptionID: subA.ID, NextAttemptAt: due},
				{ID: dB, SubscriptionID: subB.ID, NextAttemptAt: due},
			}},
			{Event: plain, Deliveries: []store.DeliveryInsert{{ID: dC, SubscriptionID: subA.ID, NextAttemptAt: now}}},
		}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{
			{ID: keyed.ID, DeliveryCount: 2},
			{ID: plain.ID, DeliveryCount: 1},
		}, res)

		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: keyed.ID})
		require.NoError(t, err)
		requireEventEqual(t, keyed, got.Event)
		require.Len(t, got.Deliveries, 2)
		bySub := map[string]*herald.Delivery{}
		for _, d := range got.Deliveries {
			bySub[d.SubscriptionID] = d
		}
		for subID, id := range map[string]string{subA.ID: dA, subB.ID: dB} {
			d := bySub[subID]
			require.NotNil(t, d, "delivery for %s", subID)
			require.Equal(t, id, d.ID)
			require.Equal(t, keyed.ID, d.EventID)
			require.Equal(t, herald.DeliveryPending, d.State)
			require.Zero(t, d.Tier)
			require.Zero(t, d.AttemptCount)
			requireTimePtrEqual(t, &due, d.NextAttemptAt)
			require.Equal(t, "bundle-7", d.EventKey, "key copied onto the delivery")
			require.Equal(t, ptr(int64(7)), d.EventVersion, "version copied onto the delivery")
			require.Zero(t, d.LastStatus)
			require.Equal(t, herald.ErrorNone, d.LastError)
			requireTimeEqual(t, now, d.CreatedAt)
			requireTimeEqual(t, now, d.UpdatedAt)
		}

		got, err = b.store.EventGet(b.ctx, &store.EventGetParams{ID: plain.ID})
		require.NoError(t, err)
		requireEventEqual(t, plain, got.Event)
		require.Nil(t, got.Event.Version)
		require.Len(t, got.Deliveries, 1)
		require.Empty(t, got.Deliveries[0].EventKey)
		require.Nil(t, got.Deliveries[0].EventVersion)
	})

	t.Run("NoDeliveries", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		ev := newEvent()
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{Event: ev}}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{ID: ev.ID}}, res)
		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
		require.NoError(t, err)
		requireEventEqual(t, ev, got.Event)
		require.Empty(t, got.Deliveries)
	})

	t.Run("EmptyCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now})
		require.NoError(t, err)
		require.Empty(t, res)
	})

	t.Run("EndedContext", func(t *testing.T) {
		// A write whose caller's context already ended is refused and
		// changes nothing (SQLite refuses before BEGIN and looks again
		// before COMMIT, ADR 0041; PostgreSQL's driver refuses to send).
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ended, cancel := context.WithCancel(b.ctx)
		cancel()
		ev := newEvent()
		_, err := b.store.EventInsertMany(ended, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			{Event: ev, Deliveries: []store.DeliveryInsert{{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now}}},
		}})
		require.Error(t, err)
		_, err = b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
		require.ErrorIs(t, err, herald.ErrNotFound, "nothing stored")

		_, first := b.publish(t, now, sub.ID)
		_, err = b.store.DeliveryClaim(ended, &store.DeliveryClaimParams{Tier: 0, Limit: 10, Now: now, LeaseOwner: ownerA, LeaseUntil: now.Add(time.Minute)})
		require.Error(t, err)
		claimed, err := b.store.DeliveryClaim(b.ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 10, Now: now, LeaseOwner: ownerA, LeaseUntil: now.Add(time.Minute)})
		require.NoError(t, err)
		require.Len(t, claimed, 1, "the refused claim leased nothing")
		require.Equal(t, first[0], claimed[0].Delivery.ID)
	})

	t.Run("GetNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		_, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: herald.NewID(herald.PrefixEvent)})
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("DuplicateAcrossCalls", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ev, first := b.publish(t, now, sub.ID, sub.ID)

		// The same producer id again, with different content and
		// deliveries: answered as a duplicate with the original count, and
		// nothing is stored.
		again := newEvent(func(e *herald.Event) { e.ID, e.Type = ev.ID, "other.type" })
		extra := herald.NewID(herald.PrefixDelivery)
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			{Event: again, Deliveries: []store.DeliveryInsert{{ID: extra, SubscriptionID: sub.ID, NextAttemptAt: now}}},
		}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{ID: ev.ID, Duplicate: true, DeliveryCount: 2}}, res)

		_, err = b.store.DeliveryGet(b.ctx, extra)
		require.ErrorIs(t, err, herald.ErrNotFound)
		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
		require.NoError(t, err)
		require.Equal(t, ev.Type, got.Event.Type, "the original is kept")
		require.ElementsMatch(t, first, deliveryIDs(got.Deliveries))
	})

	t.Run("DuplicateConcurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		// Eight calls publish the same event at once, each with a new
		// event in the same call: exactly one stores it (with its two
		// deliveries); the others are answered duplicates with the count
		// of the one stored, and their own new events are stored.
		id := herald.NewID(herald.PrefixEvent)
		const calls = 8
		results := make([][]store.EventInsertResult, calls)
		errs := make([]error, calls)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
					{Event: newEvent(func(e *herald.Event) { e.ID = id }), Deliveries: []store.DeliveryInsert{
						{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now},
						{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now},
					}},
					{Event: newEvent(), Deliveries: []store.DeliveryInsert{
						{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now},
					}},
				}})
			}()
		}
		wg.Wait()
		stored := 0
		for i := range calls {
			require.NoError(t, errs[i])
			require.Len(t, results[i], 2)
			require.Equal(t, 2, results[i][0].DeliveryCount, "call %d", i)
			if !results[i][0].Duplicate {
				stored++
			}
			require.False(t, results[i][1].Duplicate)
			require.Equal(t, 1, results[i][1].DeliveryCount)
		}
		require.Equal(t, 1, stored, "one call stored the event")
		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: id})
		require.NoError(t, err)
		require.Len(t, got.Deliveries, 2)
	})

	t.Run("DuplicateWithinCall", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ev := newEvent()
		other := newEvent()
		d1, d2, d3, d4 := herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery),
			herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery)

		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			{Event: ev, Deliveries: []store.DeliveryInsert{
				{ID: d1, SubscriptionID: sub.ID, NextAttemptAt: now},
				{ID: d2, SubscriptionID: sub.ID, NextAttemptAt: now},
			}},
			{Event: newEvent(func(e *herald.Event) { e.ID = ev.ID }), Deliveries: []store.DeliveryInsert{
				{ID: d3, SubscriptionID: sub.ID, NextAttemptAt: now},
			}},
			{Event: other, Deliveries: []store.DeliveryInsert{{ID: d4, SubscriptionID: sub.ID, NextAttemptAt: now}}},
		}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{
			{ID: ev.ID, DeliveryCount: 2},
			{ID: ev.ID, Duplicate: true, DeliveryCount: 2},
			{ID: other.ID, DeliveryCount: 1},
		}, res)
		_, err = b.store.DeliveryGet(b.ctx, d3)
		require.ErrorIs(t, err, herald.ErrNotFound)
		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{d1, d2}, deliveryIDs(got.Deliveries))
	})

	t.Run("VersionsGuard", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		insert := func(v *store.SubscriptionsVersions) (*herald.Event, string, error) {
			ev, d := newEvent(), herald.NewID(herald.PrefixDelivery)
			_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Versions: v, Events: []store.EventInsert{
				{Event: ev, Deliveries: []store.DeliveryInsert{{ID: d, SubscriptionID: sub.ID, NextAttemptAt: now}}},
			}})
			return ev, d, err
		}
		requireStored := func(ev *herald.Event, d string, stored bool) {
			t.Helper()
			_, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
			_, derr := b.store.DeliveryGet(b.ctx, d)
			if stored {
				require.NoError(t, err)
				require.NoError(t, derr)
				return
			}
			require.ErrorIs(t, err, herald.ErrNotFound, "event of a moved insert")
			require.ErrorIs(t, derr, herald.ErrNotFound, "delivery of a moved insert")
		}

		v := b.versions(t)
		ev, d, err := insert(&v)
		require.NoError(t, err, "the store's own versions pass")
		requireStored(ev, d, true)

		// A subscription change since v: nothing is stored.
		b.createSub(t)
		ev, d, err = insert(&v)
		require.ErrorIs(t, err, store.ErrSubscriptionsMoved)
		requireStored(ev, d, false)

		// A pause since v2: the same.
		v2 := b.versions(t)
		_, ids := b.publish(t, now, sub.ID)
		var c *store.ClaimedDelivery
		for _, cd := range b.claim(t, store.DeliveryClaimParams{Tier: 0, LeaseOwner: ownerA, Now: now}) {
			if cd.Delivery.ID == ids[0] {
				c = cd
			}
		}
		require.NotNil(t, c)
		_, err = b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes:           []store.DeliveryOutcome{retried(c, ownerA, now, now.Add(time.Minute))},
			PauseSubscriptions: []store.SubscriptionPause{{ID: sub.ID, Until: now.Add(time.Minute)}},
			Now:                now,
		})
		require.NoError(t, err)
		ev, d, err = insert(&v2)
		require.ErrorIs(t, err, store.ErrSubscriptionsMoved)
		requireStored(ev, d, false)

		// Current versions, and no versions at all, insert.
		v3 := b.versions(t)
		require.NotEqual(t, v2, v3)
		ev, d, err = insert(&v3)
		require.NoError(t, err)
		requireStored(ev, d, true)
		ev, d, err = insert(nil)
		require.NoError(t, err)
		requireStored(ev, d, true)
	})

	t.Run("TokensGuard", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		token := func(hash, id string) store.TokenCheck {
			require.NoError(t, b.store.APITokenCreate(b.ctx, &store.APITokenCreateParams{
				Hash: hash, ID: id, Name: id, Scopes: []string{"events:publish"}, Now: now,
			}))
			return store.TokenCheck{Hash: hash, ID: id}
		}
		a := token(strings.Repeat("a", 64), "tok_guard_a")
		c := token(strings.Repeat("c", 64), "tok_guard_c")
		// n events in one call (one and several take different statements
		// on PostgreSQL), confirming tokens.
		insert := func(n int, tokens ...store.TokenCheck) ([]*herald.Event, error) {
			var evs []*herald.Event
			var ins []store.EventInsert
			for range n {
				ev := newEvent()
				evs = append(evs, ev)
				ins = append(ins, store.EventInsert{Event: ev, Deliveries: []store.DeliveryInsert{
					{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now},
				}})
			}
			v := b.versions(t)
			_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Versions: &v, Tokens: tokens, Events: ins})
			return evs, err
		}
		requireStored := func(evs []*herald.Event, stored bool) {
			t.Helper()
			for _, ev := range evs {
				got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
				if stored {
					require.NoError(t, err)
					require.Len(t, got.Deliveries, 1)
					continue
				}
				require.ErrorIs(t, err, herald.ErrNotFound, "event of an insert whose token is gone")
			}
		}
		for _, n := range []int{1, 3} {
			evs, err := insert(n, a, c)
			require.NoError(t, err, "stored tokens pass (%d events)", n)
			requireStored(evs, true)
			// One token (a publish's own; PostgreSQL spells its check
			// apart for one event).
			evs, err = insert(n, c)
			require.NoError(t, err, "a stored token passes alone (%d events)", n)
			requireStored(evs, true)
		}

		// Revoked: nothing is stored, alone or beside a valid token.
		tokens, err := b.store.APITokenList(b.ctx)
		require.NoError(t, err)
		require.Len(t, tokens, 2)
		require.NoError(t, b.store.APITokenDelete(b.ctx, a.ID))
		for _, n := range []int{1, 3} {
			for _, set := range [][]store.TokenCheck{{a}, {c, a}} {
				evs, err := insert(n, set...)
				require.ErrorIs(t, err, store.ErrTokenGone, "%d events, tokens %v", n, set)
				requireStored(evs, false)
			}
		}
		// The same hash stored again is another token (another id).
		token(a.Hash, "tok_guard_a2")
		evs, err := insert(1, a)
		require.ErrorIs(t, err, store.ErrTokenGone)
		requireStored(evs, false)
		evs, err = insert(3, store.TokenCheck{Hash: a.Hash, ID: "tok_guard_a2"}, c)
		require.NoError(t, err)
		requireStored(evs, true)
		evs, err = insert(1, store.TokenCheck{Hash: a.Hash, ID: "tok_guard_a2"})
		require.NoError(t, err, "the new token passes alone")
		requireStored(evs, true)
		// No tokens: no check.
		evs, err = insert(1)
		require.NoError(t, err)
		requireStored(evs, true)
	})

	t.Run("AllOrNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		good, bad := newEvent(), newEvent()
		d1 := herald.NewID(herald.PrefixDelivery)

		// The second event reuses the first one's delivery id: the call
		// fails and neither event (nor any delivery) is stored.
		_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			{Event: good, Deliveries: []store.DeliveryInsert{{ID: d1, SubscriptionID: sub.ID, NextAttemptAt: now}}},
			{Event: bad, Deliveries: []store.DeliveryInsert{{ID: d1, SubscriptionID: sub.ID, NextAttemptAt: now}}},
		}})
		require.Error(t, err)
		for _, id := range []string{good.ID, bad.ID} {
			_, err = b.store.EventGet(b.ctx, &store.EventGetParams{ID: id})
			require.ErrorIs(t, err, herald.ErrNotFound, "event %s", id)
		}
		_, err = b.store.DeliveryGet(b.ctx, d1)
		require.ErrorIs(t, err, herald.ErrNotFound)

		// The same against a delivery id already stored by an earlier call.
		_, stored := b.publish(t, now, sub.ID)
		fresh := newEvent()
		d2 := herald.NewID(herald.PrefixDelivery)
		_, err = b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			{Event: fresh, Deliveries: []store.DeliveryInsert{
				{ID: d2, SubscriptionID: sub.ID, NextAttemptAt: now},
				{ID: stored[0], SubscriptionID: sub.ID, NextAttemptAt: now},
			}},
		}})
		require.Error(t, err)
		_, err = b.store.EventGet(b.ctx, &store.EventGetParams{ID: fresh.ID})
		require.ErrorIs(t, err, herald.ErrNotFound)
		_, err = b.store.DeliveryGet(b.ctx, d2)
		require.ErrorIs(t, err, herald.ErrNotFound)

		// The store is still usable and the failed ids can be published.
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			{Event: good, Deliveries: []store.DeliveryInsert{{ID: d1, SubscriptionID: sub.ID, NextAttemptAt: now}}},
		}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{ID: good.ID, DeliveryCount: 1}}, res)
	})
}

func deliveryIDs(ds []*herald.Delivery) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}
