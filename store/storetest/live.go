package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testLive covers the rule that every stored delivery names a live
// subscription (issue 10, item 4): EventInsertMany leaves out, and
// reports, the deliveries of deleted or unknown subscriptions, so a delete
// that lands between the fan-out cache's load and the insert cannot leave
// a pending delivery no loop would claim. PostgreSQL's concurrent
// interleavings are in store/postgres (delete_race_test.go);
// RunOrphaned covers what older versions left behind.
func testLive(t *testing.T, newStore NewStoreFunc) {
	t.Run("InsertDropsDeletedAndUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		live := b.createSub(t)
		disabled := b.createSub(t)
		b.disable(t, disabled)
		deleted := b.createSub(t)
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: deleted.ID, Now: now}))
		unknown := herald.NewID(herald.PrefixSubscription)

		ev := newEvent()
		ids := []string{herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery),
			herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery)}
		ins := store.EventInsert{Event: ev, Deliveries: []store.DeliveryInsert{
			{ID: ids[0], SubscriptionID: live.ID, NextAttemptAt: now},
			{ID: ids[1], SubscriptionID: deleted.ID, NextAttemptAt: now},
			{ID: ids[2], SubscriptionID: disabled.ID, NextAttemptAt: now},
			{ID: ids[3], SubscriptionID: unknown, NextAttemptAt: now},
			// Leased at insert (direct dispatch): dropped all the same, so
			// the inserting node must not send it.
			{ID: ids[4], SubscriptionID: deleted.ID, NextAttemptAt: now, LeaseOwner: ownerA, LeaseUntil: now.Add(time.Minute)},
		}}
		// An event whose only subscription is gone is still stored.
		lone := newEvent()
		loneID := herald.NewID(herald.PrefixDelivery)
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			ins,
			{Event: lone, Deliveries: []store.DeliveryInsert{{ID: loneID, SubscriptionID: deleted.ID, NextAttemptAt: now}}},
			ins, // a repeat inside the call answers with what the first stored
		}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{
			{ID: ev.ID, DeliveryCount: 2, Dropped: []string{ids[1], ids[3], ids[4]}},
			{ID: lone.ID, DeliveryCount: 0, Dropped: []string{loneID}},
			{ID: ev.ID, Duplicate: true, DeliveryCount: 2},
		}, res)

		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
		require.NoError(t, err)
		stored := map[string]herald.DeliveryState{}
		for _, d := range got.Deliveries {
			stored[d.ID] = d.State
		}
		// The disabled subscription keeps its delivery: it waits for the
		// subscription to be enabled again.
		require.Equal(t, map[string]herald.DeliveryState{ids[0]: herald.DeliveryPending, ids[2]: herald.DeliveryPending}, stored)
		for _, id := range []string{ids[1], ids[3], ids[4], loneID} {
			_, err := b.store.DeliveryGet(b.ctx, id)
			require.ErrorIs(t, err, herald.ErrNotFound, "delivery %s", id)
		}
		got, err = b.store.EventGet(b.ctx, &store.EventGetParams{ID: lone.ID})
		require.NoError(t, err)
		require.Empty(t, got.Deliveries)

		// A later call answers the duplicate with the stored count.
		res, err = b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{ins}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{ID: ev.ID, Duplicate: true, DeliveryCount: 2}}, res)

		// Nothing of the deleted subscription waits in the queue.
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
		require.NoError(t, err)
		require.Equal(t, []store.TierStats{{Tier: 0, Pending: 2, Due: 1, Held: 1}}, st.Tiers)
	})

	// A call of one event with one delivery (PostgreSQL spells its insert
	// apart for that, the usual publish): a gone subscription's delivery is
	// left out and reported, and a live one's carries the event's key and
	// version.
	t.Run("OneEventOneDelivery", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		live := b.createSub(t)
		deleted := b.createSub(t)
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: deleted.ID, Now: now}))
		for _, subID := range []string{deleted.ID, herald.NewID(herald.PrefixSubscription)} {
			ev, id := newEvent(), herald.NewID(herald.PrefixDelivery)
			res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
				Event: ev, Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: subID, NextAttemptAt: now}},
			}}})
			require.NoError(t, err)
			require.Equal(t, []store.EventInsertResult{{ID: ev.ID, DeliveryCount: 0, Dropped: []string{id}}}, res)
			got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
			require.NoError(t, err)
			require.Empty(t, got.Deliveries)
			_, err = b.store.DeliveryGet(b.ctx, id)
			require.ErrorIs(t, err, herald.ErrNotFound)
		}

		ev := newEvent(func(e *herald.Event) { e.Key, e.Version = "k-1", ptr(int64(3)) })
		id := herald.NewID(herald.PrefixDelivery)
		due := now.Add(time.Second)
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: ev, Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: live.ID, NextAttemptAt: due}},
		}}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{ID: ev.ID, DeliveryCount: 1}}, res)
		d := b.delivery(t, id)
		require.Equal(t, herald.DeliveryPending, d.State)
		require.Equal(t, live.ID, d.SubscriptionID)
		require.Equal(t, ev.ID, d.EventID)
		require.Equal(t, "k-1", d.EventKey)
		require.Equal(t, ptr(int64(3)), d.EventVersion)
		requireTimePtrEqual(t, &due, d.NextAttemptAt)
		res, err = b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: ev, Deliveries: []store.DeliveryInsert{{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: live.ID, NextAttemptAt: now}},
		}}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{ID: ev.ID, Duplicate: true, DeliveryCount: 1}}, res)
	})

	// Delete and insert interleaved one after the other: a delivery
	// inserted before the delete is cancelled by it, one inserted after is
	// not stored, and either way nothing of the subscription is pending.
	t.Run("DeleteAndInsertInterleaved", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		other := b.createSub(t)
		_, before := b.publish(t, now, sub.ID, other.ID)
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: sub.ID, Now: now}))
		b.requireState(t, herald.DeliveryCancelled, before[0])
		b.requireState(t, herald.DeliveryPending, before[1])

		ev := newEvent()
		after := []string{herald.NewID(herald.PrefixDelivery), herald.NewID(herald.PrefixDelivery)}
		res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: ev, Deliveries: []store.DeliveryInsert{
				{ID: after[0], SubscriptionID: sub.ID, NextAttemptAt: now},
				{ID: after[1], SubscriptionID: other.ID, NextAttemptAt: now},
			},
		}}})
		require.NoError(t, err)
		require.Equal(t, []store.EventInsertResult{{ID: ev.ID, DeliveryCount: 1, Dropped: []string{after[0]}}}, res)
		b.requireState(t, herald.DeliveryPending, after[1])

		list, err := b.store.DeliveryList(b.ctx, &store.DeliveryListParams{SubscriptionID: sub.ID})
		require.NoError(t, err)
		require.Len(t, list.Deliveries, 1)
		require.Equal(t, herald.DeliveryCancelled, list.Deliveries[0].State)
	})

	// System events inserted by DeliveryCompleteMany follow the same rule.
	t.Run("SystemEventsDropDeleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		alerts := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: alerts.ID, Now: now}))
		alert := newEvent(func(e *herald.Event) { e.Type = herald.EventTypeDeliveryDead })
		alertDelivery := herald.NewID(herald.PrefixDelivery)
		_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes: []store.DeliveryOutcome{died(c, ownerA, now)},
			Events: []store.EventInsert{{Event: alert, Deliveries: []store.DeliveryInsert{
				{ID: alertDelivery, SubscriptionID: alerts.ID, NextAttemptAt: now},
			}}},
			Now: now,
		})
		require.NoError(t, err)
		b.requireState(t, herald.DeliveryDead, ids[0])
		got, err := b.store.EventGet(b.ctx, &store.EventGetParams{ID: alert.ID})
		require.NoError(t, err)
		require.Empty(t, got.Deliveries)
	})
}

// disable turns a subscription's state to disabled (SubscriptionUpdate),
// keeping its deliveries.
func (b *bundle) disable(t *testing.T, sub *herald.Subscription) {
	t.Helper()
	c := *sub
	c.State, c.DisabledReason = herald.SubscriptionDisabled, "by the test"
	_, err := b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: &c, Now: now})
	require.NoError(t, err)
}

// OrphanFunc marks a subscription deleted without cancelling its
// deliveries, as a herald before issue 10 could leave it when a delete
// raced a group commit. No store method can do that any more, so each
// backend's test supplies one.
type OrphanFunc func(t *testing.T, s store.Store, subID string, at time.Time)

// RunOrphaned runs the tests that need deliveries of a deleted
// subscription still pending or in flight: they are held, not due, raise
// no staleness, and DeliveryCancelOrphaned cancels them so retention can
// take them and their events.
func RunOrphaned(t *testing.T, newStore NewStoreFunc, orphan OrphanFunc) {
	t.Helper()
	t.Run("CancelOrphaned", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		keep := b.createSub(t)
		first, flying := b.publish(t, now.Add(-time.Hour), sub.ID)
		b.claimOne(t, 0, ownerA, now, flying[0])
		second, ids := b.publish(t, now.Add(-time.Hour), sub.ID, keep.ID)
		orphan(t, b.store, sub.ID, now)

		// Held, not due: no worker is drawn to them and no alarm fires.
		st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
		require.NoError(t, err)
		require.Equal(t, []store.TierStats{{Tier: 0, Pending: 2, InFlight: 1, Due: 1, Held: 1, OldestPendingAge: time.Hour}}, st.Tiers)
		// Nor can a claim take them.
		c := b.claimOne(t, 0, ownerB, now, ids[1])
		b.complete(t, now, delivered(c, ownerB, now))

		n, err := b.store.DeliveryCancelOrphaned(b.ctx, &store.DeliveryCancelOrphanedParams{Now: now})
		require.NoError(t, err)
		require.Equal(t, 2, n, "the pending one and the one in flight")
		b.requireState(t, herald.DeliveryCancelled, flying[0], ids[0])
		b.requireState(t, herald.DeliveryDelivered, ids[1])
		n, err = b.store.DeliveryCancelOrphaned(b.ctx, &store.DeliveryCancelOrphanedParams{Now: now})
		require.NoError(t, err)
		require.Zero(t, n)
		st, err = b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
		require.NoError(t, err)
		require.Equal(t, []store.TierStats{{Tier: 0}}, st.Tiers)

		// Cancelled, they no longer keep retention from their events.
		res, err := b.store.RetentionSweep(b.ctx, &store.RetentionSweepParams{
			Delivered: keepDelivered, Dead: keepDead, Events: keepEvents, Now: now.Add(keepEvents + time.Hour),
		})
		require.NoError(t, err)
		// With its deliveries gone, the deleted subscription goes too.
		require.Equal(t, &store.RetentionSweepResult{Deliveries: 3, Events: 2, Subscriptions: 1}, res)
		for _, ev := range []*herald.Event{first, second} {
			_, err = b.store.EventGet(b.ctx, &store.EventGetParams{ID: ev.ID})
			require.ErrorIs(t, err, herald.ErrNotFound)
		}
	})
}
