package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestNodeLivenessHoldRescuesAll: the process that holds the data directory
// lock is the only one, so on start every in-flight delivery, whoever
// leased it, belongs to a dead process and is rescued at once
// (store/liveness.go); DeliveryRescueDead has nothing to do.
func TestNodeLivenessHoldRescuesAll(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	now := time.Now().UTC().Truncate(time.Millisecond)

	s := openPath(t, path)
	sub, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), URL: "https://example.com/hook", Method: "POST",
			Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
		},
		Secret: "whsec_" + herald.NewID(""), Now: now,
	})
	require.NoError(t, err)
	var ins []store.EventInsert
	for range 4 {
		ins = append(ins, store.EventInsert{
			Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Data: []byte(`{}`), CreatedAt: now},
			Deliveries: []store.DeliveryInsert{{
				ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now,
			}},
		})
	}
	_, err = s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: ins, Now: now})
	require.NoError(t, err)
	for _, owner := range []string{"node_old", "node_older"} {
		claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
			LeaseOwner: owner, LeaseUntil: now.Add(time.Hour), Limit: 2, Now: now,
		})
		require.NoError(t, err)
		require.Len(t, claimed, 2)
	}
	require.NoError(t, s.Close()) // as after kill -9: the leases stay

	s = openPath(t, path)
	n, err := s.NodeLivenessHold(ctx, &store.NodeLivenessHoldParams{NodeID: "node_new", Now: now.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, 4, n, "every lease, whatever its owner")
	n, err = s.DeliveryRescueDead(ctx, &store.DeliveryRescueDeadParams{Now: now.Add(time.Second)})
	require.NoError(t, err)
	require.Zero(t, n)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		LeaseOwner: "node_new", LeaseUntil: now.Add(time.Hour), Limit: 10, Now: now.Add(time.Second),
	})
	require.NoError(t, err)
	require.Len(t, claimed, 4, "all claimable again, at once")
}
