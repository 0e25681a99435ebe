package postgres_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
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
	go func() { _ = b.(store.Notifier).Listen(ctx, func(uint64) { woken <- struct{}{} }) }()
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

// A notification names the tiers its commits went to, and a node does not
// hear its own: it wakes its own loops itself.
func TestNotifyTiersNotOwn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := testdb.PostgresSchema(t)
	a := testdb.OpenPostgres(t, schema)
	b := testdb.OpenPostgres(t, schema)
	c := testdb.OpenPostgres(t, schema)
	sub := createSub(ctx, t, a, "sub_a")

	listen := func(s store.Store) chan uint64 {
		heard := make(chan uint64, 100)
		go func() { _ = s.(store.Notifier).Listen(ctx, func(tiers uint64) { heard <- tiers }) }()
		select {
		case tiers := <-heard:
			require.Equal(t, store.AllTiers, tiers, "the first call, once listening, names every tier")
		case <-time.After(10 * time.Second):
			t.Fatal("listener did not start")
		}
		return heard
	}
	heardB, heardC := listen(b), listen(c)
	recv := func(heard chan uint64, what string) uint64 {
		t.Helper()
		select {
		case tiers := <-heard:
			return tiers
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification: %s", what)
			return 0
		}
	}
	insert := func(s store.Store) {
		t.Helper()
		now := time.Now().UTC()
		_, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Data: json.RawMessage(`{}`), CreatedAt: now},
			Deliveries: []store.DeliveryInsert{{
				ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: now,
			}},
		}}})
		require.NoError(t, err)
	}

	// b's own insert: c hears it (tier 0); b does not. Then a's insert,
	// sent after b's: the next thing b hears is a's.
	insert(b)
	require.Equal(t, store.TierBit(0), recv(heardC, "b's insert, on c"))
	insert(a)
	require.Equal(t, store.TierBit(0), recv(heardC, "a's insert, on c"))
	require.Equal(t, store.TierBit(0), recv(heardB, "a's insert, on b"))
	require.Empty(t, heardB, "b heard its own insert")

	// A retry scheduled into tier 3 names tier 3.
	claimed, err := a.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 10, LeaseOwner: "node-a",
		LeaseUntil: time.Now().Add(time.Minute), Now: time.Now().UTC()})
	require.NoError(t, err)
	require.NotEmpty(t, claimed)
	now := time.Now().UTC()
	var outcomes []store.DeliveryOutcome
	next := now.Add(time.Hour)
	for _, cd := range claimed {
		outcomes = append(outcomes, store.DeliveryOutcome{
			DeliveryID: cd.Delivery.ID, LeaseOwner: "node-a", State: herald.DeliveryPending, Tier: 3,
			NextAttemptAt: &next,
			Attempt:       herald.Attempt{N: cd.Attempt, At: now, DurationMS: 5, Status: 500, Error: herald.ErrorHTTPStatus, ErrorMessage: "endpoint answered 500"},
		})
	}
	_, err = a.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
	require.NoError(t, err)
	require.Equal(t, store.TierBit(3), recv(heardB, "a's retry, on b"))
}

func TestWorkPayload(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		payload string
		tiers   uint64
		ok      bool
	}{
		{"herald", store.AllTiers, true},         // a node from before tiers and tags
		{"herald 1 aa11", 1, true},               // tier 0 from another node
		{"herald 9 aa11", 9, true},               // tiers 0 and 3
		{"herald 1 mine", 0, false},              // our own
		{"other 1 aa11", 0, false},               // another schema
		{"heraldx 1 aa11", 0, false},             // a schema with our name as its prefix
		{"herald zz aa11", store.AllTiers, true}, // unreadable tiers: everything
		{"herald 0 aa11", store.AllTiers, true},
		{"herald 1", 0, false},
		{"herald 1 a b", 0, false},
	} {
		tiers, ok := postgres.WorkPayload(c.payload, "herald", "mine")
		require.Equal(t, c.ok, ok, c.payload)
		require.Equal(t, c.tiers, tiers, c.payload)
	}
}
