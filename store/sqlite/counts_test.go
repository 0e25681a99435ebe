package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestMigrateCountsSeeded: migration 007 starts its counters from the rows
// the database already holds. The database is taken back to before 007 by
// hand (its table and triggers dropped), rows are changed without
// triggers, and 007's file runs again.
func TestMigrateCountsSeeded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herald.db")
	s := openPath(t, path)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sub := &herald.Subscription{
		ID: herald.NewID(herald.PrefixSubscription), URL: "https://example.com/h", Method: "POST",
		Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
	}
	_, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: "whsec_x", Now: now})
	require.NoError(t, err)
	var ins []store.EventInsert
	var ids []string
	for range 4 {
		id := herald.NewID(herald.PrefixDelivery)
		ids = append(ids, id)
		ins = append(ins, store.EventInsert{
			Event:      &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Data: json.RawMessage(`{}`), CreatedAt: now},
			Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: sub.ID, NextAttemptAt: now}},
		})
	}
	_, err = s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: ins, Now: now})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	db, err := sql.Open("sqlite3", path)
	require.NoError(t, err)
	for _, q := range []string{
		`DROP TRIGGER deliveries_count_insert`, `DROP TRIGGER deliveries_count_delete`, `DROP TRIGGER deliveries_count_update_in`, `DROP TRIGGER deliveries_count_update_out`,
		`DROP TABLE delivery_counts`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	for i, state := range []string{"dead", "dead", "superseded"} {
		_, err := db.Exec(`UPDATE deliveries SET state = ? WHERE id = ?`, state, ids[i])
		require.NoError(t, err)
	}
	migration, err := os.ReadFile("migrations/007_delivery_counts.sql")
	require.NoError(t, err)
	_, err = db.Exec(string(migration))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s = openPath(t, path)
	st, err := s.StatsGet(ctx, &store.StatsGetParams{Tiers: 1, Now: now})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 0, 1}, []int64{st.Dead, st.Skipped, st.Superseded})
}
