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

// TestHotWritesUseGenericPlans: a small event insert and a small
// completion run with one generic plan per connection (genericPlansSQL),
// not planned at every execution as the connection's other statements
// are; a large batch and claims still plan for their parameters. One pooled connection, so every call uses the
// session whose prepared statements are read.
func TestHotWritesUseGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	s, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(), Schema: schema, MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(ctx))
	createSub(ctx, t, s, "sub_p")

	const n = 8
	var ids []string
	for i := range n {
		ids = append(ids, insertEvents(ctx, t, s, fmt.Sprintf("p%d", i), 1, t0, "sub_p")...)
	}
	for i := range n {
		claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
			Tier: 0, Limit: 1, Now: t0, LeaseOwner: "node1", LeaseUntil: t0.Add(time.Minute),
		})
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		res, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0, Outcomes: []store.DeliveryOutcome{{
			DeliveryID: claimed[0].Delivery.ID, LeaseOwner: "node1", State: herald.DeliveryDelivered,
			Attempt: herald.Attempt{N: 1, At: t0, Status: 200},
		}}})
		require.NoError(t, err)
		require.Equal(t, 1, res.Applied, "completion %d", i)
	}
	require.Len(t, ids, n)

	plans, err := s.PreparedPlans(ctx, "INSERT INTO events", "INSERT INTO attempts", "WITH done AS", "WITH ranked AS")
	require.NoError(t, err)
	for _, mark := range []string{"INSERT INTO events", "INSERT INTO attempts", "WITH done AS"} {
		require.Equal(t, [2]int64{n, 0}, plans[mark], "%q: generic and custom plans", mark)
	}
	claims := plans["WITH ranked AS"]
	require.Zero(t, claims[0], "claims never run a generic plan")
	require.Positive(t, claims[1], "claims plan for their parameters")

	// At the limit (16 rows) still generic; past it, and a large batch,
	// planned for their size.
	insertEvents(ctx, t, s, "at16", 16, t0, "sub_p")
	insertEvents(ctx, t, s, "at17", 17, t0, "sub_p")
	insertEvents(ctx, t, s, "big", 100, t0, "sub_p")
	plans, err = s.PreparedPlans(ctx, "INSERT INTO events")
	require.NoError(t, err)
	require.Equal(t, [2]int64{n + 1, 2}, plans["INSERT INTO events"], "16 events: generic; 17 and 100: custom")
}
