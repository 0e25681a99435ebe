package postgres_test

import (
	"context"
	"fmt"
	"strings"
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
// are; a large batch and claims still plan for their parameters. One
// pooled connection and the hot-write pool's (read together), so every
// session a call used is read.
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

	// With every hot-write connection taken, a small batch runs on the
	// main pool, still with a generic plan (genericPlansSQL).
	release, err := s.HotHold(ctx)
	require.NoError(t, err)
	insertEvents(ctx, t, s, "held", 2, t0, "sub_p")
	release()
	plans, err = s.PreparedPlans(ctx, "INSERT INTO events")
	require.NoError(t, err)
	require.Equal(t, [2]int64{n + 2, 2}, plans["INSERT INTO events"], "2 events beside a held hot pool: generic")
	// The small batches that found a free hot-write connection ran there.
	hot, err := s.PreparedPlansHot(ctx, "INSERT INTO events", "WITH done AS")
	require.NoError(t, err)
	require.Equal(t, [2]int64{n + 1, 0}, hot["INSERT INTO events"], "the one-event inserts and the 16 on the hot-write pool")
	require.Equal(t, [2]int64{n, 0}, hot["WITH done AS"], "the completions on the hot-write pool")
}

// TestClaimFindsClaimedRowsByTIDOnStaleStatistics: the claim locks its
// candidates, and marks the rows it locked, by their tuple ids even when
// the statistics still say the active partition is empty (a burst
// arriving between two queue vacuums). Found by id, through a primary key
// whose second column the state check could use or a partial index that
// check implied, every claim read the whole backlog (issue 28).
func TestClaimFindsClaimedRowsByTIDOnStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	s, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(), Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Migrate(ctx))
	s.GrowthAnalyzeOff() // the statistics stay as the vacuum left them
	createSub(ctx, t, s, "sub_a")
	createSub(ctx, t, s, "sub_b")

	// A drained burst: the partition keeps its pages, and ANALYZE sees
	// them empty.
	insertEvents(ctx, t, s, "old", 2000, t0, "sub_a")
	conn := schemaConn(ctx, t, schema)
	_, err = conn.Exec(ctx, "UPDATE deliveries SET state = 'delivered' WHERE state = 'pending'")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "VACUUM (ANALYZE, TRUNCATE false) deliveries_active")
	require.NoError(t, err)
	// The next burst, before the next ANALYZE.
	insertEvents(ctx, t, s, "new", 5000, t0, "sub_a")
	insertEvents(ctx, t, s, "steady", 3, t0, "sub_b")

	plan, err := s.ClaimPlan(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: 64, Now: t0.Add(time.Second), LeaseOwner: "node1", LeaseUntil: t0.Add(time.Minute),
	})
	require.NoError(t, err)
	// The lock and the update find the candidates by their tuple ids,
	// whatever the statistics say.
	for _, cte := range []string{"locked", "claimed"} {
		scans := cteScans(plan, cte)
		require.NotEmpty(t, scans, "no scan of deliveries in %s:\n%s", cte, plan)
		for _, line := range scans {
			require.True(t, strings.HasPrefix(line, "->  Tid Scan on deliveries_active"), "%s reads deliveries by another path:\n%s", cte, plan)
		}
	}

	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: 64, Now: t0.Add(time.Second), LeaseOwner: "node1", LeaseUntil: t0.Add(time.Minute),
	})
	require.NoError(t, err)
	require.Len(t, claimed, 64)
	perSub := map[string]int{}
	for _, c := range claimed {
		perSub[c.Delivery.SubscriptionID]++
	}
	require.Equal(t, map[string]int{"sub_a": 61, "sub_b": 3}, perSub)
}

// cteScans are the lines of EXPLAIN's text, inside the claim's CTE named
// cte, that scan the active partition of deliveries.
func cteScans(plan, cte string) []string {
	var out []string
	in, indent := false, 0
	for _, line := range strings.Split(plan, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		depth := len(line) - len(trimmed)
		if trimmed == "CTE "+cte {
			in, indent = true, depth
			continue
		}
		if in && depth <= indent {
			in = false
		}
		if in && strings.Contains(line, "Scan") && strings.Contains(line, " on deliveries_active") {
			out = append(out, trimmed)
		}
	}
	return out
}
