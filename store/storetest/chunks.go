package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// chunkBoundaries are id-list lengths around the statement chunks a backend
// may split lists into (SQLite: 250 ids per statement, padded to a power
// of two): one chunk exactly, one more, two, four.
var chunkBoundaries = []int{250, 251, 500, 1000}

// testChunks checks the calls that take id lists at every chunk boundary
// (issue 20: a retried batch of more than 250 events failed on SQLite, and
// the subscription lookups split the same way).
func testChunks(t *testing.T, newStore NewStoreFunc) {
	t.Run("DuplicatesMixedWithNew", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		withDelivery := func(ev *herald.Event) store.EventInsert {
			return store.EventInsert{Event: ev, Deliveries: []store.DeliveryInsert{
				{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now},
			}}
		}
		for _, n := range chunkBoundaries {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				stored := make([]store.EventInsert, n)
				for i := range stored {
					stored[i] = withDelivery(newEvent())
				}
				_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: stored, Now: now})
				require.NoError(t, err)

				// The retry: every stored event again (with new delivery
				// ids, as a client's retry would get), with a new event
				// after every other one.
				var retry []store.EventInsert
				fresh := map[string]bool{}
				for i, in := range stored {
					retry = append(retry, withDelivery(in.Event))
					if i%2 == 0 {
						ev := newEvent()
						fresh[ev.ID] = true
						retry = append(retry, withDelivery(ev))
					}
				}
				res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: retry, Now: now})
				require.NoError(t, err)
				require.Len(t, res, len(retry))
				for i, r := range res {
					id := retry[i].Event.ID
					require.Equal(t, id, r.ID, "result %d", i)
					require.Equal(t, !fresh[id], r.Duplicate, "result %d (%s)", i, id)
					require.Equal(t, 1, r.DeliveryCount, "result %d (%s)", i, id)
				}
				for i, in := range retry {
					if !fresh[in.Event.ID] {
						continue
					}
					got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: in.Event.ID})
					require.NoError(t, err, "new event %d stored", i)
					require.Len(t, got.Deliveries, 1)
					require.Equal(t, in.Deliveries[0].ID, got.Deliveries[0].ID)
				}
			})
		}
	})

	// One event to n subscriptions: every delivery is kept (the live
	// subscription lookup is chunked), and the stats count every
	// subscription's due delivery as claimable (the enabled subscription
	// lookup too).
	t.Run("SubscriptionLists", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		subs := make([]string, chunkBoundaries[len(chunkBoundaries)-1])
		for i := range subs {
			subs[i] = b.createSub(t).ID
		}
		due := 0 // deliveries due so far: each boundary adds its own
		for _, n := range chunkBoundaries {
			t.Run(fmt.Sprint(n), func(t *testing.T) {
				ev := newEvent()
				ins := store.EventInsert{Event: ev}
				for _, subID := range subs[:n] {
					ins.Deliveries = append(ins.Deliveries, store.DeliveryInsert{
						ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: subID, NextAttemptAt: now,
					})
				}
				res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: []store.EventInsert{ins}, Now: now})
				require.NoError(t, err)
				require.Equal(t, []store.EventInsertResult{{ID: ev.ID, DeliveryCount: n}}, res)
				due += n

				// The stats look up the n subscriptions with due work.
				st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
				require.NoError(t, err)
				require.EqualValues(t, due, st.Tiers[0].Due, "every subscription's deliveries are claimable")
				require.Zero(t, st.Tiers[0].Held)
			})
		}
	})
}
