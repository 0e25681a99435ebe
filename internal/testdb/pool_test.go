package testdb

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestPoolReset: a schema used by one test and reset is, for the next,
// what a fresh migration gives (rows, the migrations' own rows, sequences),
// and one whose definitions a test changed is dropped, not reused. Not
// parallel: the second test must get the first one's schema back.
func TestPoolReset(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var used string
	t.Run("Use", func(t *testing.T) {
		used = poolSchema(t)
		s := OpenPostgres(t, used)
		_, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Now: now, Secret: "whsec_a", Subscription: &herald.Subscription{
			ID: "sub_a", URL: "https://example.com/a", Method: "POST", Ordering: herald.OrderingNone,
			State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now}})
		require.NoError(t, err)
		_, err = s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
			Event:      &herald.Event{ID: "evt_a", Type: "t", Data: json.RawMessage(`{}`), CreatedAt: now},
			Deliveries: []store.DeliveryInsert{{ID: "dlv_a", SubscriptionID: "sub_a", NextAttemptAt: now}},
		}}})
		require.NoError(t, err)
		c, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: 1, Now: now, LeaseOwner: "n", LeaseUntil: now.Add(time.Minute)})
		require.NoError(t, err)
		require.Len(t, c, 1)
		_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: now, Outcomes: []store.DeliveryOutcome{{
			DeliveryID: "dlv_a", LeaseOwner: "n", State: herald.DeliveryDelivered,
			Attempt: herald.Attempt{N: 1, At: now, Status: 200}}}})
		require.NoError(t, err)
	})

	t.Run("Reused", func(t *testing.T) {
		reused := poolSchema(t)
		require.Equal(t, used, reused)
		fresh := PostgresSchema(t)
		OpenPostgres(t, fresh) // migrates it
		conn := adminConn(ctx, t)
		defer conn.Close(ctx)

		state := func(schema string) (map[string]string, []int64) {
			seed, err := poolSeedRead(ctx, conn, schema)
			require.NoError(t, err)
			delete(seed.rows, "herald_migrations") // applied_at differs
			var seqs []int64
			require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(array_agg(coalesce(last_value, -1) ORDER BY sequencename), '{}')
				FROM pg_sequences WHERE schemaname = $1`, schema).Scan(&seqs))
			return seed.rows, seqs
		}
		wantRows, wantSeqs := state(fresh)
		gotRows, gotSeqs := state(reused)
		require.NotEmpty(t, wantRows, "the migrations seed some tables")
		require.Equal(t, wantRows, gotRows, "only the migrations' own rows, as migrated")
		require.Equal(t, wantSeqs, gotSeqs, "sequences restarted")

		_, err := conn.Exec(ctx, "ALTER TABLE "+reused+".subscriptions ADD COLUMN extra integer")
		require.NoError(t, err)
	})

	t.Run("ChangedIsDropped", func(t *testing.T) {
		conn := adminConn(ctx, t)
		defer conn.Close(ctx)
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", used).Scan(&n))
		require.Zero(t, n)
		require.NotEqual(t, used, poolSchema(t))
	})
}
