package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// partitionCounts returns how many deliveries each partition holds.
func partitionCounts(ctx context.Context, t *testing.T, schema string) (active, done int) {
	t.Helper()
	conn := schemaConn(ctx, t, schema)
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT (SELECT count(*) FROM deliveries_active), (SELECT count(*) FROM deliveries_done)").Scan(&active, &done))
	return active, done
}

// TestMigratePartitionKeepsDeliveries: migration 005 carries every delivery
// of a version-4 schema over, each into the partition of its state, and
// the store keeps working on them.
func TestMigratePartitionKeepsDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, schema := openAtVersion(ctx, t, 4)

	ids := seedOld(ctx, t, schema, "m", 3, t0, "sub_a")
	conn := schemaConn(ctx, t, schema)
	_, err := conn.Exec(ctx, "UPDATE deliveries SET state = 'delivered', attempt_count = 1 WHERE id = $1", ids[0])
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "UPDATE deliveries SET state = 'dead', attempt_count = 5 WHERE id = $1", ids[1])
	require.NoError(t, err)

	require.NoError(t, s.Migrate(ctx))
	active, done := partitionCounts(ctx, t, schema)
	require.Equal(t, 1, active)
	require.Equal(t, 2, done)
	for i, want := range []herald.DeliveryState{herald.DeliveryDelivered, herald.DeliveryDead, herald.DeliveryPending} {
		g, err := s.DeliveryGet(ctx, ids[i])
		require.NoError(t, err)
		require.Equal(t, want, g.Delivery.State)
	}

	// The pending one is claimed and delivered: it moves to the done
	// partition. The dead one is retried: it moves back.
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: 10, Now: t0, LeaseOwner: "node1", LeaseUntil: t0.Add(time.Minute),
	})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	res, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0, Outcomes: []store.DeliveryOutcome{{
		DeliveryID: ids[2], LeaseOwner: "node1", State: herald.DeliveryDelivered,
		Attempt: herald.Attempt{N: 1, At: t0, Status: 200},
	}}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Applied)
	_, err = s.DeliveryRetry(ctx, &store.DeliveryRetryParams{ID: ids[1], Now: t0})
	require.NoError(t, err)
	active, done = partitionCounts(ctx, t, schema)
	require.Equal(t, 1, active, "the retried dead letter")
	require.Equal(t, 2, done, "the two delivered")
}

// TestCompleteAfterConcurrentMove: a completion that waits for a row which
// another transaction moves to the other partition (here: the subscription
// is deleted, cancelling its in-flight delivery) would fail with a
// serialization failure; the store runs it again and reports the outcome
// as stale instead.
func TestCompleteAfterConcurrentMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	s := testdb.OpenPostgres(t, schema)
	createSub(ctx, t, s, "sub_a")
	ids := insertEvents(ctx, t, s, "c", 1, t0, "sub_a")
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: 1, Now: t0, LeaseOwner: "node1", LeaseUntil: t0.Add(time.Minute),
	})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	// Another session cancels the delivery and holds its transaction open.
	conn := schemaConn(ctx, t, schema)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "UPDATE deliveries SET state = 'cancelled', lease_owner = NULL WHERE id = $1", ids[0])
	require.NoError(t, err)

	type result struct {
		res *store.DeliveryCompleteManyResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0, Outcomes: []store.DeliveryOutcome{{
			DeliveryID: ids[0], LeaseOwner: "node1", State: herald.DeliveryDelivered,
			Attempt: herald.Attempt{N: 1, At: t0, Status: 200},
		}}})
		done <- result{res, err}
	}()
	// Commit only once the completion waits for the row lock.
	watch := schemaConn(ctx, t, schema)
	require.Eventually(t, func() bool {
		var n int
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%delivered_counter%'`).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, tx.Commit(ctx))

	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, 0, r.res.Applied)
	require.Equal(t, []string{ids[0]}, r.res.Stale)
	g, err := s.DeliveryGet(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, herald.DeliveryCancelled, g.Delivery.State)
}

// TestQueueVacuum: QueueVacuum vacuums the active partition (the server
// records it) and the other queue tables; asked for the archive, it
// vacuums the archive tables instead, only when autovacuum is off.
func TestQueueVacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	s := testdb.OpenPostgres(t, schema)
	v, ok := s.(store.Vacuumer)
	require.True(t, ok, "the PostgreSQL store is a store.Vacuumer")

	res, err := v.QueueVacuum(ctx, &store.QueueVacuumParams{})
	require.NoError(t, err)
	require.Equal(t, []string{"deliveries_active", "delivery_keys", "throttle_starts", "delivered_counter"}, res.Tables)
	conn := schemaConn(ctx, t, schema)
	var vacuums int
	require.NoError(t, conn.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname = 'deliveries_active'`, schema).Scan(&vacuums))
	require.Equal(t, 1, vacuums)

	var autovacuum bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('autovacuum')::bool").Scan(&autovacuum))
	res, err = v.QueueVacuum(ctx, &store.QueueVacuumParams{Archive: true})
	require.NoError(t, err)
	if autovacuum {
		require.Empty(t, res.Tables, "autovacuum cleans the archive")
	} else {
		require.Equal(t, []string{"deliveries_done", "attempts", "events"}, res.Tables)
	}
}

// TestQueueVacuumKeepsPages: vacuuming the queue never truncates its
// tables (migration 021 and QueueVacuum's TRUNCATE false): truncation
// takes an ACCESS EXCLUSIVE lock every claim and publish queues behind,
// and a queue empties after every burst (issue 28).
func TestQueueVacuumKeepsPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	s := testdb.OpenPostgres(t, schema)
	conn := schemaConn(ctx, t, schema)
	for _, table := range []string{"deliveries_active", "delivery_keys", "throttle_starts", "delivered_counter"} {
		var opts []string
		require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, table).Scan(&opts))
		require.Contains(t, opts, "vacuum_truncate=false", table)
	}

	// A burst worked off: 2,000 deliveries leave the active partition,
	// whose pages are then all empty — what a truncating VACUUM gives
	// back.
	createSub(ctx, t, s, "sub_v")
	insertEvents(ctx, t, s, "v", 2000, t0, "sub_v")
	_, err := conn.Exec(ctx, "UPDATE deliveries SET state = 'cancelled' WHERE state = 'pending'")
	require.NoError(t, err)
	size := func() (n int64) {
		require.NoError(t, conn.QueryRow(ctx, "SELECT pg_relation_size('deliveries_active')").Scan(&n))
		return n
	}
	before := size()
	require.Positive(t, before)
	_, err = s.(store.Vacuumer).QueueVacuum(ctx, &store.QueueVacuumParams{})
	require.NoError(t, err)
	require.Equal(t, before, size(), "the active partition kept its pages")
	// The server's own VACUUM follows the table option too.
	_, err = conn.Exec(ctx, "VACUUM deliveries_active")
	require.NoError(t, err)
	require.Equal(t, before, size())
}
