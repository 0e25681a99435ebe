package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
)

// TestGrowthAnalyze: the store analyzes the active partition once its
// pending rows grew past what the planner was last told (analyze.go), and
// not while inserts and outcomes balance.
func TestGrowthAnalyze(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	s, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(), Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(ctx))
	createSub(ctx, t, s, "sub_a")
	conn := schemaConn(ctx, t, schema)
	reltuples := func() float64 {
		var n float64
		require.NoError(t, conn.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'deliveries_active'::regclass").Scan(&n))
		return n
	}

	// A steady flow: each delivery is inserted and completed before the
	// next, 1,200 in all (more than growthAnalyzeMin), and nothing is analyzed.
	for i := range 1200 {
		ids := insertEvents(ctx, t, s, fmt.Sprintf("steady%d", i), 1, t0, "sub_a")
		claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 1, Now: t0, LeaseOwner: "n1", LeaseUntil: t0.Add(time.Minute)})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		res, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0, Outcomes: []store.DeliveryOutcome{{
			DeliveryID: ids[0], LeaseOwner: "n1", State: herald.DeliveryDelivered, Attempt: herald.Attempt{N: 1, At: t0, Status: 200},
		}}})
		require.NoError(t, err)
		require.Equal(t, 1, res.Applied)
	}
	require.Zero(t, s.GrowthAnalyzeRuns(), "a balanced flow analyzes nothing")

	// A burst: the partition is analyzed while it is still pending.
	insertEvents(ctx, t, s, "burst", 3000, t0, "sub_a")
	require.Eventually(t, func() bool { return reltuples() >= 1000 }, 10*time.Second, 20*time.Millisecond,
		"the burst was not analyzed: reltuples %v", reltuples())
	require.Positive(t, s.GrowthAnalyzeRuns())
}
