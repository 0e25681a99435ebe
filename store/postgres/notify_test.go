package postgres_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// A burst of commits from one node sends at most one notification per
// debounce interval (15 ms), not one per commit.
func TestNotifyDebounced(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := testdb.PostgresSchema(t)
	a := testdb.OpenPostgres(t, schema)
	b := testdb.OpenPostgres(t, schema)
	sub := createSub(ctx, t, a, "sub_a")

	woken := make(chan struct{}, 1000)
	go func() { _ = b.(store.Notifier).Listen(ctx, func() { woken <- struct{}{} }) }()
	select {
	case <-woken: // listening
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not start")
	}

	const commits = 100
	start := time.Now()
	for i := range commits {
		now := time.Now().UTC()
		_, err := a.EventInsertMany(ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Data: json.RawMessage(`{}`), CreatedAt: now},
			Deliveries: []store.DeliveryInsert{{
				ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now,
			}},
		}}})
		require.NoError(t, err, "commit %d", i)
	}
	// At least one wake-up arrives; by any moment, no more than one per
	// 15 ms since the burst began (+1 for the leading edge, +1 slack).
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up")
	}
	n := 1 + len(woken)
	elapsed := time.Since(start)
	bound := int(elapsed/(15*time.Millisecond)) + 2
	t.Logf("%d commits in %s: %d wake-ups (bound %d)", commits, elapsed.Round(time.Millisecond), n, bound)
	require.LessOrEqual(t, n, bound)
}
