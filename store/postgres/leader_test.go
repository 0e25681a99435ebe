package postgres_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

func TestLeaderExclusive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := testdb.PostgresSchema(t)
	a := testdb.OpenPostgres(t, schema)
	b := testdb.OpenPostgres(t, schema)

	attempt := func(s store.Store) bool {
		t.Helper()
		ok, err := s.LeaderAttempt(ctx)
		require.NoError(t, err)
		return ok
	}
	require.True(t, attempt(a))
	require.False(t, attempt(b))
	require.True(t, attempt(a)) // confirmed, not re-entered
	require.False(t, attempt(b))

	// One release frees it for the other node.
	require.NoError(t, a.LeaderRelease(ctx))
	require.True(t, attempt(b))
	require.False(t, attempt(a))

	// Closing the leader's store ends its session: the lock goes with it.
	require.NoError(t, b.Close())
	require.True(t, attempt(a))

	// Another schema (another deployment) has a leader of its own.
	other := testdb.Postgres(t)
	require.True(t, attempt(other))
	require.True(t, attempt(a))
}

func TestListenWakesOtherNode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := testdb.PostgresSchema(t)
	a := testdb.OpenPostgres(t, schema)
	b := testdb.OpenPostgres(t, schema)
	woken := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() {
		done <- b.(store.Notifier).Listen(ctx, func(uint64) { woken <- struct{}{} })
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-woken:
		case err := <-done:
			t.Fatalf("Listen returned while waiting for %s: %v", what, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up for %s", what)
		}
	}
	// Listen calls onWork once it is listening.
	wait("the listener to start")

	now := time.Now().UTC()
	publish := func(s store.Store, subID string) {
		t.Helper()
		_, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Data: json.RawMessage(`{}`), CreatedAt: now},
			Deliveries: []store.DeliveryInsert{{
				ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: subID, NextAttemptAt: now,
			}},
		}}})
		require.NoError(t, err)
	}

	sub := createSub(ctx, t, a, "sub_a")
	publish(a, sub.ID)
	wait("a commit on the other store")

	// A retry of a dead letter wakes too. (Claims and a dead outcome
	// create no due work and notify nothing.)
	for len(woken) > 0 {
		<-woken
	}
	claimed, err := a.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 10, Now: now, LeaseOwner: "x", LeaseUntil: now.Add(time.Minute)})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	_, err = a.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: now, Outcomes: []store.DeliveryOutcome{{
		DeliveryID: claimed[0].Delivery.ID, LeaseOwner: "x",
		Attempt: herald.Attempt{N: 1, At: now, Status: 500, Error: herald.ErrorHTTPStatus},
		State:   herald.DeliveryDead,
	}}})
	require.NoError(t, err)
	_, err = a.DeliveryRetry(ctx, &store.DeliveryRetryParams{ID: claimed[0].Delivery.ID, Now: now})
	require.NoError(t, err)
	wait("a retry")
}

// A leader whose session dies loses the lock at once (another node takes
// it), and its next attempts reconnect.
func TestLeaderSessionLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := testdb.PostgresSchema(t)
	a := testdb.OpenPostgres(t, schema)
	b := testdb.OpenPostgres(t, schema)
	ok, err := a.LeaderAttempt(ctx)
	require.NoError(t, err)
	require.True(t, ok)

	// Kill a's leader session from outside (this schema's lock only).
	admin, err := pgx.Connect(ctx, testdb.URL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	var killed int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND classid = $1 AND objsubid = 2
		  AND objid::bigint = (hashtext($2)::bigint & 4294967295)`, 0x68726c65, schema).Scan(&killed))
	require.Equal(t, 1, killed)

	// b can take it once the server has ended the session.
	require.Eventually(t, func() bool {
		ok, err := b.LeaderAttempt(ctx)
		return err == nil && ok
	}, 10*time.Second, 10*time.Millisecond)

	// a notices (an error or false), then keeps asking without error.
	ok, _ = a.LeaderAttempt(ctx)
	require.False(t, ok)
	ok, err = a.LeaderAttempt(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, b.LeaderRelease(ctx))
	ok, err = a.LeaderAttempt(ctx)
	require.NoError(t, err)
	require.True(t, ok)
}
