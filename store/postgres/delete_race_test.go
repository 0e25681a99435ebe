package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// A SubscriptionDelete racing an EventInsertMany on other connections
// never leaves a pending delivery of the deleted subscription (issue 10,
// item 4). Each interleaving is forced with a third connection holding a
// lock one of them must wait for, and every step waits for the database to
// report who blocks whom (pg_blocking_pids), so the order is the same on
// every run.
func TestSubscriptionDeleteRacesInsert(t *testing.T) {
	t.Parallel()

	type race struct {
		s      store.Store
		raw    *pgx.Conn // holds the lock that orders the race
		mon    *pgx.Conn // watches pg_stat_activity
		sub    *herald.Subscription
		rawPID int
	}
	setupRace := func(t *testing.T) *race {
		schema := testdb.PostgresSchema(t)
		r := &race{s: testdb.OpenPostgres(t, schema), raw: schemaConn(t.Context(), t, schema), mon: schemaConn(t.Context(), t, schema)}
		r.sub = createSub(t.Context(), t, r.s, herald.NewID(herald.PrefixSubscription))
		require.NoError(t, r.raw.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&r.rawPID))
		return r
	}
	// blockedBy waits until a backend waits for a lock held by pid and
	// returns it, or returns 0 once done is closed (the call it watches
	// went through without waiting).
	blockedBy := func(t *testing.T, r *race, pid int, done <-chan struct{}) int {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			var waiter int
			err := r.mon.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
				WHERE $1 = ANY (pg_blocking_pids(pid)) LIMIT 1`, pid).Scan(&waiter)
			if err == nil {
				return waiter
			}
			require.ErrorIs(t, err, pgx.ErrNoRows)
			select {
			case <-done:
				return 0
			case <-time.After(2 * time.Millisecond):
			}
		}
		t.Fatalf("nothing waited for backend %d", pid)
		return 0
	}
	insert := func(r *race, evID, dID string) (chan struct{}, *[]store.EventInsertResult, *error) {
		done := make(chan struct{})
		var res []store.EventInsertResult
		var err error
		go func() {
			defer close(done)
			res, err = r.s.EventInsertMany(context.Background(), &store.EventInsertManyParams{Now: t0, Events: []store.EventInsert{{
				Event:      &herald.Event{ID: evID, Type: "t", Data: json.RawMessage(`{}`), CreatedAt: t0},
				Deliveries: []store.DeliveryInsert{{ID: dID, SubscriptionID: r.sub.ID, NextAttemptAt: t0}},
			}}})
		}()
		return done, &res, &err
	}
	remove := func(r *race) (chan struct{}, *error) {
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			err = r.s.SubscriptionDelete(context.Background(), &store.SubscriptionDeleteParams{ID: r.sub.ID, Now: t0})
		}()
		return done, &err
	}
	// nothingPending checks the invariant: no delivery of the deleted
	// subscription is pending or in flight.
	nothingPending := func(t *testing.T, r *race) {
		t.Helper()
		list, err := r.s.DeliveryList(t.Context(), &store.DeliveryListParams{SubscriptionID: r.sub.ID})
		require.NoError(t, err)
		for _, d := range list.Deliveries {
			require.Equal(t, herald.DeliveryCancelled, d.State, "delivery %s of the deleted subscription", d.ID)
		}
	}

	// The insert has taken its snapshot and locks when the delete starts
	// (it waits on an event id another transaction is inserting): the
	// delete must wait for it, then cancel what it stored.
	t.Run("InsertFirst", func(t *testing.T) {
		t.Parallel()
		r := setupRace(t)
		ctx := t.Context()
		evID, dID := herald.NewID(herald.PrefixEvent), herald.NewID(herald.PrefixDelivery)
		tx, err := r.raw.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO events (id, type, data, created_at, delivery_count) VALUES ($1, 't', '{}', $2, 0)`, evID, t0)
		require.NoError(t, err)

		insDone, res, insErr := insert(r, evID, dID)
		insPID := blockedBy(t, r, r.rawPID, insDone)
		require.NotZero(t, insPID, "the insert waits for the other transaction's event")
		delDone, delErr := remove(r)
		blockedBy(t, r, insPID, delDone) // the fix: the delete waits for the insert
		require.NoError(t, tx.Rollback(ctx))
		<-insDone
		<-delDone
		require.NoError(t, *insErr)
		require.NoError(t, *delErr)

		require.Equal(t, []store.EventInsertResult{{ID: evID, DeliveryCount: 1}}, *res)
		nothingPending(t, r)
		got, err := r.s.DeliveryGet(ctx, dID)
		require.NoError(t, err)
		require.Equal(t, herald.DeliveryCancelled, got.Delivery.State)
	})

	// The delete has marked the subscription deleted but not committed
	// (its cancellation waits on a delivery another transaction locked)
	// when the insert starts: the insert must wait for it, then see the
	// subscription deleted and store nothing for it.
	t.Run("DeleteFirst", func(t *testing.T) {
		t.Parallel()
		r := setupRace(t)
		ctx := t.Context()
		old := herald.NewID(herald.PrefixDelivery)
		_, err := r.s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: t0, Events: []store.EventInsert{{
			Event:      &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Data: json.RawMessage(`{}`), CreatedAt: t0},
			Deliveries: []store.DeliveryInsert{{ID: old, SubscriptionID: r.sub.ID, NextAttemptAt: t0}},
		}}})
		require.NoError(t, err)
		tx, err := r.raw.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM deliveries WHERE id = $1 FOR UPDATE`, old)
		require.NoError(t, err)

		delDone, delErr := remove(r)
		delPID := blockedBy(t, r, r.rawPID, delDone)
		require.NotZero(t, delPID, "the delete's cancellation waits for the locked delivery")
		evID, dID := herald.NewID(herald.PrefixEvent), herald.NewID(herald.PrefixDelivery)
		insDone, res, insErr := insert(r, evID, dID)
		blockedBy(t, r, delPID, insDone) // the fix: the insert waits for the delete
		require.NoError(t, tx.Commit(ctx))
		<-insDone
		<-delDone
		require.NoError(t, *insErr)
		require.NoError(t, *delErr)

		require.Equal(t, []store.EventInsertResult{{ID: evID, DeliveryCount: 0, Dropped: []string{dID}}}, *res)
		nothingPending(t, r)
		_, err = r.s.DeliveryGet(ctx, dID)
		require.ErrorIs(t, err, herald.ErrNotFound)
	})
}
