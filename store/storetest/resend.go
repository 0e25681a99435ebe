package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testResend covers DeliveryCreateMany (resend and replay) and the oldest
// first EventList replay walks.
func testResend(t *testing.T, newStore NewStoreFunc) {
	t.Run("NewDeliveryOfDeliveredEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ev, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		b.complete(t, now, delivered(c, ownerA, now))

		at := now.Add(time.Minute)
		id := herald.NewID(herald.PrefixDelivery)
		n, err := b.store.DeliveryCreateMany(b.ctx, &store.DeliveryCreateManyParams{
			SubscriptionID: sub.ID, Now: at,
			Deliveries: []store.DeliveryCreate{{ID: id, Event: store.EventKeyOf(ev), NextAttemptAt: at}},
		})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		got := b.delivery(t, id)
		require.Equal(t, herald.DeliveryPending, got.State)
		require.Equal(t, 0, got.Tier)
		require.Equal(t, ev.ID, got.EventID)
		b.requireState(t, herald.DeliveryDelivered, ids[0])
		res, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
		require.NoError(t, err)
		require.Len(t, res.Deliveries, 2)
		b.claimOne(t, 0, ownerA, at, id)
	})

	t.Run("DeletedSubscriptionOrMissingEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ev, _ := b.publish(t, now, sub.ID)
		gone := b.createSub(t)
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: gone.ID, Now: now}))
		one := func(subID string, k store.EventKey) (int, string) {
			id := herald.NewID(herald.PrefixDelivery)
			n, err := b.store.DeliveryCreateMany(b.ctx, &store.DeliveryCreateManyParams{
				SubscriptionID: subID, Now: now,
				Deliveries: []store.DeliveryCreate{{ID: id, Event: k, NextAttemptAt: now}},
			})
			require.NoError(t, err)
			return n, id
		}
		n, id := one(gone.ID, store.EventKeyOf(ev))
		require.Zero(t, n, "a deleted subscription gets nothing")
		_, err := b.store.DeliveryGet(b.ctx, id)
		require.ErrorIs(t, err, herald.ErrNotFound)
		n, _ = one("sub_unknown", store.EventKeyOf(ev))
		require.Zero(t, n)
		// The same id in another tenant is another event, not stored.
		n, id = one(sub.ID, store.EventKey{ID: ev.ID, Tenant: "acme"})
		require.Zero(t, n)
		_, err = b.store.DeliveryGet(b.ctx, id)
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	// A resent older version of a latest subscription's key is skipped:
	// the new delivery goes through the per-key rules like any other.
	t.Run("LatestSkipsOlderVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createOrderedSub(t, herald.OrderingLatest, 0)
		v1ev := newEvent(func(e *herald.Event) { e.Key, e.Version = "k", ptr[int64](1) })
		_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{Event: v1ev}}})
		require.NoError(t, err)
		v2 := b.publishKeyed(t, now, sub.ID, "k", ptr[int64](2))
		c := b.claimOne(t, 0, ownerA, now, v2)
		b.complete(t, now, delivered(c, ownerA, now))

		at := now.Add(time.Second)
		id := herald.NewID(herald.PrefixDelivery)
		n, err := b.store.DeliveryCreateMany(b.ctx, &store.DeliveryCreateManyParams{
			SubscriptionID: sub.ID, Now: at,
			Deliveries: []store.DeliveryCreate{{ID: id, Event: store.EventKeyOf(v1ev), NextAttemptAt: at}},
		})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: at}))
		b.requireState(t, herald.DeliverySkipped, id)
		b.requireCounts(t, 0, 1, 0)
	})

	// Replays of more events than one SQLite statement takes: every
	// delivery is stored, in input order (fifo claims the first one).
	t.Run("Chunks", func(t *testing.T) {
		t.Parallel()
		for _, n := range chunkBoundaries {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				b := setup(t, newStore)
				sub := b.createOrderedSub(t, herald.OrderingFIFO, 0)
				events := make([]store.EventInsert, n)
				for i := range events {
					events[i] = store.EventInsert{Event: newEvent(func(e *herald.Event) { e.Key = "k" })}
				}
				_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: events, Now: now})
				require.NoError(t, err)
				ds := make([]store.DeliveryCreate, n)
				for i := range ds {
					ds[i] = store.DeliveryCreate{ID: herald.NewID(herald.PrefixDelivery),
						Event: store.EventKeyOf(events[i].Event), NextAttemptAt: now}
				}
				got, err := b.store.DeliveryCreateMany(b.ctx, &store.DeliveryCreateManyParams{
					SubscriptionID: sub.ID, Deliveries: ds, Now: now,
				})
				require.NoError(t, err)
				require.Equal(t, n, got)
				list, err := b.store.DeliveryList(b.ctx, &store.DeliveryListParams{SubscriptionID: sub.ID, Limit: 1000})
				require.NoError(t, err)
				require.Len(t, list.Deliveries, n)
				claimed := b.claim(t, store.DeliveryClaimParams{Now: now})
				require.Len(t, claimed, 1, "one at a time per key")
				require.Equal(t, ds[0].ID, claimed[0].Delivery.ID, "the first in input order is the key's head")
			})
		}
	})

	t.Run("EventListOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		var want []string
		for i := range 5 {
			ev := newEvent(func(e *herald.Event) { e.CreatedAt = now.Add(time.Duration(i/2) * time.Second) })
			_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{Event: ev}}})
			require.NoError(t, err)
			want = append(want, ev.ID)
		}
		// Ties on created_at go by id.
		for i := 0; i+1 < len(want); i += 2 {
			if want[i] > want[i+1] {
				want[i], want[i+1] = want[i+1], want[i]
			}
		}
		var got []string
		var after *store.EventCursor
		for {
			res, err := b.store.EventList(b.ctx, &store.EventListParams{Oldest: true, Limit: 2, After: after,
				Since: now, Until: now.Add(time.Hour)})
			require.NoError(t, err)
			for _, ev := range res.Events {
				got = append(got, ev.ID)
			}
			if !res.More {
				break
			}
			last := res.Events[len(res.Events)-1]
			after = &store.EventCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		}
		require.Equal(t, want, got)
	})
}
