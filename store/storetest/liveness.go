package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testLiveness checks the node liveness rule (store/liveness.go) as far as
// one store shows it; store/postgres has the two-node half.
func testLiveness(t *testing.T, newStore NewStoreFunc) {
	t.Run("HoldRescuesOwnLeases", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		fifo := b.createOrderedSub(t, herald.OrderingFIFO, 0)
		_, ids := b.publish(t, now, sub.ID)
		k1 := b.publishKeyed(t, now, fifo.ID, "k", nil)
		k2 := b.publishKeyed(t, now.Add(time.Millisecond), fifo.ID, "k", nil)
		// A previous process of node A leased them for an hour, and died.
		claimed := b.claim(t, store.DeliveryClaimParams{LeaseUntil: now.Add(time.Hour)})
		require.ElementsMatch(t, []string{ids[0], k1}, claimedIDs(claimed))

		// Node A starts again: its old leases are rescued at once, long
		// before they expire, with the rescue's rules.
		at := now.Add(time.Second)
		n, err := b.store.NodeLivenessHold(b.ctx, &store.NodeLivenessHoldParams{NodeID: ownerA, Now: at})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		for _, id := range []string{ids[0], k1} {
			d := b.delivery(t, id)
			require.Equal(t, herald.DeliveryPending, d.State)
			require.Zero(t, d.Tier)
			require.Zero(t, d.AttemptCount)
			requireTimePtrEqual(t, &at, d.NextAttemptAt)
		}
		// The key is free again, and k1 is still its head.
		again := b.claim(t, store.DeliveryClaimParams{Now: at})
		require.ElementsMatch(t, []string{ids[0], k1}, claimedIDs(again))
		b.requireState(t, herald.DeliveryPending, k2)
	})

	t.Run("RescueDeadSparesLiveAndUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, err := b.store.NodeLivenessHold(b.ctx, &store.NodeLivenessHoldParams{NodeID: ownerA, Now: now})
		require.NoError(t, err)
		_, ids := b.publish(t, now, sub.ID, sub.ID)
		// Node A (alive: this store holds it) and node B (never held
		// liveness: an older herald) lease one each.
		require.Len(t, b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseOwner: ownerA}), 1)
		require.Len(t, b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseOwner: ownerB}), 1)

		n, err := b.store.DeliveryRescueDead(b.ctx, &store.DeliveryRescueDeadParams{Now: now.Add(time.Second)})
		require.NoError(t, err)
		require.Zero(t, n, "a live node and an owner that never held liveness are not dead")
		b.requireState(t, herald.DeliveryInFlight, ids...)

		// Node A is alive but stuck: its lease expires and the expiry
		// rescues it (the fallback); liveness still does not.
		late := now.Add(2 * time.Minute)
		n, err = b.store.DeliveryRescueDead(b.ctx, &store.DeliveryRescueDeadParams{Now: late})
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: late})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		b.requireState(t, herald.DeliveryPending, ids...)
	})
}
