package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
)

// TestNodeLivenessTwoNodes: node B takes node A's leases the moment A's
// database session dies (as when its process is killed), never while A
// lives, and a node id held by a live node cannot be taken by another.
func TestNodeLivenessTwoNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	a, b := testdb.OpenPostgres(t, schema), testdb.OpenPostgres(t, schema)
	now := time.Now().UTC().Truncate(time.Millisecond)

	sub := livenessSubscription(t, a, now)
	_, err := a.NodeLivenessHold(ctx, &store.NodeLivenessHoldParams{NodeID: "node-a", Now: now})
	require.NoError(t, err)
	_, err = b.NodeLivenessHold(ctx, &store.NodeLivenessHoldParams{NodeID: "node-b", Now: now})
	require.NoError(t, err)

	var ins []store.EventInsert
	for range 3 {
		ins = append(ins, store.EventInsert{
			Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Data: []byte(`{}`), CreatedAt: now},
			Deliveries: []store.DeliveryInsert{{
				ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now,
			}},
		})
	}
	_, err = a.EventInsertMany(ctx, &store.EventInsertManyParams{Events: ins, Now: now})
	require.NoError(t, err)
	claimed, err := a.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		LeaseOwner: "node-a", LeaseUntil: now.Add(time.Hour), Limit: 10, Now: now,
	})
	require.NoError(t, err)
	require.Len(t, claimed, 3)

	// A lives: B takes nothing, and cannot take A's id either.
	n, err := b.DeliveryRescueDead(ctx, &store.DeliveryRescueDeadParams{Now: now})
	require.NoError(t, err)
	require.Zero(t, n)
	c := testdb.OpenPostgres(t, schema)
	_, err = c.NodeLivenessHold(ctx, &store.NodeLivenessHoldParams{NodeID: "node-a", Now: now})
	require.ErrorIs(t, err, herald.ErrConflict)

	// A's process dies: its session ends without a Close.
	conn := schemaConn(ctx, t, schema)
	var killed bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND granted
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(current_schema() || '/node-a', 0)`).Scan(&killed))
	require.True(t, killed)

	// The server frees the lock once the backend exits: within moments.
	deadline := time.Now().Add(5 * time.Second)
	for n == 0 && time.Now().Before(deadline) {
		n, err = b.DeliveryRescueDead(ctx, &store.DeliveryRescueDeadParams{Now: now.Add(time.Second)})
		require.NoError(t, err)
		if n == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	require.Equal(t, 3, n, "all of dead A's leases, an hour before they expire")
	for _, cd := range claimed {
		d, err := b.DeliveryGet(ctx, cd.Delivery.ID)
		require.NoError(t, err)
		require.Equal(t, herald.DeliveryPending, d.Delivery.State)
		require.Zero(t, d.Delivery.AttemptCount)
	}
	var registered int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM herald_nodes`).Scan(&registered))
	require.Equal(t, 1, registered, "A is unregistered; B is left")

	// B closes gracefully: it unregisters, and its id is free at once.
	require.NoError(t, b.Close())
	_, err = c.NodeLivenessHold(ctx, &store.NodeLivenessHoldParams{NodeID: "node-b", Now: now})
	require.NoError(t, err)
}

// BenchmarkDeliveryRescueDead: what the engine's liveness check costs each
// second on a node (docs/adr/0020-node-liveness.md): two live nodes
// registered, a thousand deliveries in flight, nobody dead.
func BenchmarkDeliveryRescueDead(b *testing.B) {
	ctx := context.Background()
	schema := testdb.PostgresSchema(b)
	a, other := testdb.OpenPostgres(b, schema), testdb.OpenPostgres(b, schema)
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub := livenessSubscription(b, a, now)
	for _, s := range []struct {
		st store.Store
		id string
	}{{a, "node-a"}, {other, "node-b"}} {
		_, err := s.st.NodeLivenessHold(ctx, &store.NodeLivenessHoldParams{NodeID: s.id, Now: now})
		require.NoError(b, err)
	}
	var ins []store.EventInsert
	for range 1000 {
		ins = append(ins, store.EventInsert{
			Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Data: []byte(`{}`), CreatedAt: now},
			Deliveries: []store.DeliveryInsert{{
				ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now,
			}},
		})
	}
	_, err := a.EventInsertMany(ctx, &store.EventInsertManyParams{Events: ins, Now: now})
	require.NoError(b, err)
	_, err = other.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		LeaseOwner: "node-b", LeaseUntil: now.Add(time.Hour), Limit: 1000, Now: now,
	})
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		n, err := a.DeliveryRescueDead(ctx, &store.DeliveryRescueDeadParams{Now: now})
		require.NoError(b, err)
		require.Zero(b, n)
	}
}

// TestNodeLivenessSessionLost: a live node whose lock session breaks (a
// database restart, a killed backend) takes its lock again on its next
// DeliveryRescueDead, and never rescues its own leases meanwhile.
func TestNodeLivenessSessionLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	a := testdb.OpenPostgres(t, schema)
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err := a.NodeLivenessHold(ctx, &store.NodeLivenessHoldParams{NodeID: "node-a", Now: now})
	require.NoError(t, err)
	// The keepalives that bound how long a vanished host keeps its lock
	// (liveness.go).
	ps := a.(*postgres.Store)
	for name, want := range map[string]string{"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3", "tcp_user_timeout": "25000"} {
		got, err := ps.LivenessSetting(ctx, name)
		require.NoError(t, err)
		require.Equal(t, want, got, name)
	}

	conn := schemaConn(ctx, t, schema)
	held := func() bool {
		var ok bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND objsubid = 1 AND granted
			AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(current_schema() || '/node-a', 0))`).Scan(&ok))
		return ok
	}
	require.True(t, held())
	var killed bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND granted
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(current_schema() || '/node-a', 0)`).Scan(&killed))
	require.True(t, killed)
	require.Eventually(t, func() bool { return !held() }, 5*time.Second, 10*time.Millisecond)

	n, err := a.DeliveryRescueDead(ctx, &store.DeliveryRescueDeadParams{Now: now})
	require.NoError(t, err)
	require.Zero(t, n)
	require.True(t, held(), "the lock is taken again")
	var registered int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM herald_nodes WHERE id = 'node-a'`).Scan(&registered))
	require.Equal(t, 1, registered)
}

// livenessSubscription creates an enabled unordered subscription on s.
func livenessSubscription(tb testing.TB, s store.Store, now time.Time) *herald.Subscription {
	tb.Helper()
	sub, err := s.SubscriptionCreate(context.Background(), &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), URL: "https://example.com/hook", Method: "POST",
			Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
		},
		Secret: "whsec_" + herald.NewID(""), Now: now,
	})
	require.NoError(tb, err)
	return sub
}
