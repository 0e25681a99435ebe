package postgres_test

import (
	"context"
	"testing"
	"time"

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
