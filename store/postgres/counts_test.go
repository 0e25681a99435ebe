package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestMigrateCountsSeeded: migration 007 starts its counters from the rows
// a schema already holds, and the triggers carry on from there.
func TestMigrateCountsSeeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, schema := openAtVersion(ctx, t, 5)

	ids := seedOld(ctx, t, schema, "c", 5, t0, "sub_a")
	conn := schemaConn(ctx, t, schema)
	for i, state := range []string{"dead", "dead", "skipped", "superseded"} {
		_, err := conn.Exec(ctx, "UPDATE deliveries SET state = $2 WHERE id = $1", ids[i], state)
		require.NoError(t, err)
	}

	require.NoError(t, s.Migrate(ctx))
	st, err := s.StatsGet(ctx, &store.StatsGetParams{Tiers: 1, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1, 1}, []int64{st.Dead, st.Skipped, st.Superseded})

	// The pending one dies: counted on top.
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: 10, Now: t0, LeaseOwner: "node1", LeaseUntil: t0.Add(time.Minute),
	})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0, Outcomes: []store.DeliveryOutcome{{
		DeliveryID: claimed[0].Delivery.ID, LeaseOwner: "node1", State: herald.DeliveryDead, Tier: 0,
		Attempt: herald.Attempt{N: 1, At: t0, Status: 500, Error: herald.ErrorHTTPStatus},
	}}})
	require.NoError(t, err)
	st, err = s.StatsGet(ctx, &store.StatsGetParams{Tiers: 1, Now: t0})
	require.NoError(t, err)
	require.EqualValues(t, 3, st.Dead)
}

// TestMigrateCountsTriggersOnDone: migration 022 moves the counting
// triggers to deliveries_done, the only partition that holds counted
// states, and the counters carry on across it: rows counted before keep
// their counts, and changes after are counted.
func TestMigrateCountsTriggersOnDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, schema := openAtVersion(ctx, t, 21)
	ids := seedOld(ctx, t, schema, "c", 4, t0, "sub_a")
	conn := schemaConn(ctx, t, schema)
	for i, state := range []string{"dead", "skipped"} {
		_, err := conn.Exec(ctx, "UPDATE deliveries SET state = $2 WHERE id = $1", ids[i], state)
		require.NoError(t, err)
	}

	require.NoError(t, s.Migrate(ctx))
	rows, err := conn.Query(ctx, `SELECT c.relname, t.tgname FROM pg_trigger t
		JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND t.tgfoid = 'delivery_counts_track'::regproc ORDER BY t.tgname`, schema)
	require.NoError(t, err)
	type trigger struct{ Table, Name string }
	triggers, err := pgx.CollectRows(rows, pgx.RowToStructByPos[trigger])
	require.NoError(t, err)
	require.Equal(t, []trigger{
		{"deliveries_done", "deliveries_count_delete"},
		{"deliveries_done", "deliveries_count_insert"},
		{"deliveries_done", "deliveries_count_update"},
	}, triggers)

	st, err := s.StatsGet(ctx, &store.StatsGetParams{Tiers: 1, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1, 0}, []int64{st.Dead, st.Skipped, st.Superseded})
	// Leaving a counted state (done → active) and entering one (active →
	// done) are both counted.
	_, err = s.DeliveryRetry(ctx, &store.DeliveryRetryParams{ID: ids[0], Now: t0})
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "UPDATE deliveries SET state = 'superseded' WHERE id = $1", ids[2])
	require.NoError(t, err)
	st, err = s.StatsGet(ctx, &store.StatsGetParams{Tiers: 1, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 1}, []int64{st.Dead, st.Skipped, st.Superseded})
}
