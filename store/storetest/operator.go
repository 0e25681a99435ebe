package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testOperator covers the listings and counts behind the dashboard and the
// CLI: event search, delivery time windows, dead-letter groups, counted and
// stepped redrive, and per-subscription stats.
func testOperator(t *testing.T, newStore NewStoreFunc) {
	t.Run("EventList", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		// Five events a minute apart; two share a key, one has another type.
		var evs []*herald.Event
		for i := range 5 {
			ev := newEvent(func(e *herald.Event) { e.CreatedAt = now.Add(time.Duration(i) * time.Minute) })
			if i == 1 || i == 3 {
				ev.Key = "order-7"
			}
			if i == 4 {
				ev.Type = "user.created"
			}
			_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: ev.CreatedAt, Events: []store.EventInsert{{
				Event: ev, Deliveries: []store.DeliveryInsert{{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: ev.CreatedAt}},
			}}})
			require.NoError(t, err)
			evs = append(evs, ev)
		}
		ids := func(res *store.EventListResult) []string {
			var out []string
			for _, e := range res.Events {
				out = append(out, e.ID)
			}
			return out
		}
		list := func(p store.EventListParams) *store.EventListResult {
			t.Helper()
			res, err := b.store.EventList(b.ctx, &p)
			require.NoError(t, err)
			return res
		}

		// Newest first, paged by (created_at, id).
		page := list(store.EventListParams{Limit: 2})
		require.Equal(t, []string{evs[4].ID, evs[3].ID}, ids(page))
		require.True(t, page.More)
		last := page.Events[1]
		page = list(store.EventListParams{Limit: 2, After: &store.EventCursor{CreatedAt: last.CreatedAt, ID: last.ID}})
		require.Equal(t, []string{evs[2].ID, evs[1].ID}, ids(page))
		last = page.Events[1]
		page = list(store.EventListParams{Limit: 2, After: &store.EventCursor{CreatedAt: last.CreatedAt, ID: last.ID}})
		require.Equal(t, []string{evs[0].ID}, ids(page))
		require.False(t, page.More)
		require.JSONEq(t, string(evs[0].Data), string(page.Events[0].Data))
		require.True(t, evs[0].CreatedAt.Equal(page.Events[0].CreatedAt))

		require.Equal(t, []string{evs[3].ID, evs[1].ID}, ids(list(store.EventListParams{Key: "order-7"})))
		require.Equal(t, []string{evs[4].ID}, ids(list(store.EventListParams{Type: "user.created"})))
		// [Since, Until): minutes 1 and 2.
		require.Equal(t, []string{evs[2].ID, evs[1].ID}, ids(list(store.EventListParams{
			Since: now.Add(time.Minute), Until: now.Add(3 * time.Minute),
		})))
		require.Empty(t, list(store.EventListParams{Type: "nope"}).Events)
	})

	t.Run("EventListTypePattern", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		// The type filter takes the patterns subscriptions take, with
		// MatchEventType's meaning: case-sensitive, '*' across dots, '?' one
		// character however many bytes, '%' and '_' literal.
		types := []string{"order.created", "order.item.added", "Order.created", "orders", "user.créé", "a%b", "a_b", "axb"}
		byType := map[string]string{}
		for i, typ := range types {
			ev := newEvent(func(e *herald.Event) {
				e.Type = typ
				e.CreatedAt = now.Add(time.Duration(i) * time.Second)
			})
			_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: ev.CreatedAt, Events: []store.EventInsert{{
				Event: ev, Deliveries: []store.DeliveryInsert{{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: ev.CreatedAt}},
			}}})
			require.NoError(t, err)
			byType[ev.ID] = typ
		}
		for _, pattern := range []string{"order.*", "order.?reated", "*.created", "user.cr?é", "a%b", "a_b", "a?b", "*", "order.created", "Order*", "nope.*"} {
			res, err := b.store.EventList(b.ctx, &store.EventListParams{Type: pattern})
			require.NoError(t, err)
			var got []string
			for _, e := range res.Events {
				got = append(got, byType[e.ID])
			}
			var want []string
			for i := len(types) - 1; i >= 0; i-- { // newest first
				if herald.MatchEventType([]string{pattern}, types[i]) {
					want = append(want, types[i])
				}
			}
			require.Equal(t, want, got, "type pattern %q", pattern)
		}
	})

	t.Run("EventListExcludeSystem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// herald.* (case-sensitive, as herald.IsSystemEventType) is left
		// out; look-alikes stay, and so does paging past the excluded.
		types := []string{"order.created", herald.EventTypeDeliveryDead, "Herald.delivery.dead", "herald", "heraldx.y",
			herald.EventTypeSubscriptionDisabled, "user.created", herald.EventTypeQueueStale}
		byID := map[string]string{}
		for i, typ := range types {
			ev := newEvent(func(e *herald.Event) {
				e.Type = typ
				e.CreatedAt = now.Add(time.Duration(i) * time.Second)
			})
			_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: ev.CreatedAt,
				Events: []store.EventInsert{{Event: ev}}})
			require.NoError(t, err)
			byID[ev.ID] = typ
		}
		list := func(p store.EventListParams) []string {
			t.Helper()
			var got []string
			for {
				res, err := b.store.EventList(b.ctx, &p)
				require.NoError(t, err)
				for _, e := range res.Events {
					got = append(got, byID[e.ID])
				}
				if !res.More {
					return got
				}
				last := res.Events[len(res.Events)-1]
				p.After = &store.EventCursor{CreatedAt: last.CreatedAt, ID: last.ID}
			}
		}
		var all, user []string
		for i := len(types) - 1; i >= 0; i-- {
			all = append(all, types[i])
			if !herald.IsSystemEventType(types[i]) {
				user = append(user, types[i])
			}
		}
		require.Equal(t, all, list(store.EventListParams{}))
		require.Equal(t, []string{"user.created", "heraldx.y", "herald", "Herald.delivery.dead", "order.created"}, user)
		require.Equal(t, user, list(store.EventListParams{ExcludeSystem: true}))
		require.Equal(t, user, list(store.EventListParams{ExcludeSystem: true, Limit: 2}))
		require.Equal(t, []string{"user.created", "order.created"}, list(store.EventListParams{ExcludeSystem: true, Type: "*.created"}))
		require.Empty(t, list(store.EventListParams{ExcludeSystem: true, Type: "herald.*"}))
	})

	t.Run("DeliveryListWindow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		var ids []string
		for i := range 3 {
			at := now.Add(time.Duration(i) * time.Minute)
			ids = append(ids, b.publishKeyed(t, at, sub.ID, "", nil))
		}
		res, err := b.store.DeliveryList(b.ctx, &store.DeliveryListParams{
			SubscriptionID: sub.ID, Since: now.Add(time.Minute), Until: now.Add(2 * time.Minute),
		})
		require.NoError(t, err)
		require.Len(t, res.Deliveries, 1)
		require.Equal(t, ids[1], res.Deliveries[0].ID)
		res, err = b.store.DeliveryList(b.ctx, &store.DeliveryListParams{Since: now.Add(time.Minute)})
		require.NoError(t, err)
		require.Len(t, res.Deliveries, 2)
	})

	// dieWith makes a delivery of subID dead at at with the error class.
	dieWith := func(t *testing.T, b *bundle, subID string, at time.Time, class herald.ErrorClass) string {
		t.Helper()
		_, d := b.publish(t, now, subID)
		c := b.claimOne(t, 0, ownerA, now, d[0])
		out := died(c, ownerA, at)
		out.Attempt.Error = class
		require.Equal(t, 1, b.complete(t, at, out).Applied)
		return d[0]
	}

	t.Run("DeadLetterGroupsCountAndSteps", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub, other := b.createSub(t), b.createSub(t)
		t1, t2, t3 := now.Add(time.Minute), now.Add(2*time.Minute), now.Add(3*time.Minute)
		a := dieWith(t, b, sub.ID, t1, herald.ErrorHTTPStatus)
		c := dieWith(t, b, sub.ID, t2, herald.ErrorHTTPStatus)
		d := dieWith(t, b, sub.ID, t3, herald.ErrorHTTPStatus)
		tm := dieWith(t, b, sub.ID, t2, herald.ErrorTimeout)
		o := dieWith(t, b, other.ID, t3, herald.ErrorConnection)

		groups, err := b.store.DeadLetterGroupList(b.ctx, &store.DeadLetterGroupListParams{})
		require.NoError(t, err)
		require.Len(t, groups, 3)
		require.Equal(t, sub.ID, groups[0].SubscriptionID)
		require.Equal(t, herald.ErrorHTTPStatus, groups[0].Error)
		require.Equal(t, 3, groups[0].Count)
		require.True(t, t1.Equal(groups[0].OldestAt), "oldest %v", groups[0].OldestAt)
		require.True(t, t3.Equal(groups[0].NewestAt), "newest %v", groups[0].NewestAt)
		groups, err = b.store.DeadLetterGroupList(b.ctx, &store.DeadLetterGroupListParams{SubscriptionID: other.ID})
		require.NoError(t, err)
		require.Len(t, groups, 1)
		require.Equal(t, herald.ErrorConnection, groups[0].Error)

		params := store.DeadLetterRedriveParams{SubscriptionID: sub.ID, Error: herald.ErrorHTTPStatus, Now: t3}
		n, err := b.store.DeadLetterCount(b.ctx, &params)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		all := params
		all.Error = ""
		n, err = b.store.DeadLetterCount(b.ctx, &all)
		require.NoError(t, err)
		require.Equal(t, 4, n)

		// Steps of two: the ones that died first go first.
		params.Limit = 2
		n, err = b.store.DeadLetterRedrive(b.ctx, &params)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		b.requireState(t, herald.DeliveryPending, a, c)
		b.requireState(t, herald.DeliveryDead, d, tm, o)
		n, err = b.store.DeadLetterCount(b.ctx, &params)
		require.NoError(t, err)
		require.Equal(t, 1, n, "count ignores Limit")
		n, err = b.store.DeadLetterRedrive(b.ctx, &params)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.requireState(t, herald.DeliveryPending, d)
		b.requireState(t, herald.DeliveryDead, tm, o)

		// A deleted subscription's dead letters are not counted as redrivable.
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: other.ID, Now: t3}))
		n, err = b.store.DeadLetterCount(b.ctx, &store.DeadLetterRedriveParams{SubscriptionID: other.ID, Now: t3})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("SubscriptionStats", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub, other, idle := b.createSub(t), b.createSub(t), b.createSub(t)
		_ = idle
		t1 := now.Add(time.Minute)
		// sub: one delivered and one dead after t1, one dead before, one pending.
		_, d := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, d[0])
		require.Equal(t, 1, b.complete(t, t1, delivered(c, ownerA, t1)).Applied)
		dieWith(t, b, sub.ID, t1.Add(time.Second), herald.ErrorHTTPStatus)
		dieWith(t, b, sub.ID, now, herald.ErrorHTTPStatus)
		b.publish(t, now.Add(time.Hour), sub.ID)
		// other: one in flight.
		_, d = b.publish(t, now, other.ID)
		b.claimOne(t, 0, ownerA, now, d[0])

		stats, err := b.store.SubscriptionStatsList(b.ctx, &store.SubscriptionStatsListParams{Since: t1})
		require.NoError(t, err)
		got := map[string]store.SubscriptionStats{}
		for _, st := range stats {
			got[st.SubscriptionID] = *st
		}
		require.Len(t, got, 2, "a subscription with nothing is left out")
		require.Equal(t, store.SubscriptionStats{SubscriptionID: sub.ID, Delivered: 1, Dead: 1, Pending: 1}, got[sub.ID])
		require.Equal(t, store.SubscriptionStats{SubscriptionID: other.ID, InFlight: 1}, got[other.ID])
	})
}
