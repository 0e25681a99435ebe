package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestMigratePublishOrder: after migration 006 the deliveries it found keep
// their order ((created_at, id)) before every delivery stored after it,
// and a key's last delivered position from before compares as before with
// the old rows and older than every new one.
func TestMigratePublishOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "h.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) int64 { return t0.Add(time.Duration(n) * time.Millisecond).UnixMilli() }

	// A version-4 schema with the rows a version-4 herald left (raw SQL:
	// today's store code may need columns of later migrations).
	migs, err := loadMigrations()
	require.NoError(t, err)
	require.NoError(t, s.writeTx(ctx, "version 4", func(tx queryer) error {
		exec := func(q string, args ...any) {
			t.Helper()
			_, err := tx.ExecContext(ctx, q, args...)
			require.NoError(t, err)
		}
		exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)
		for _, m := range migs {
			if m.Version <= 4 {
				exec(m.SQL)
				exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, m.Version)
			}
		}
		for sub, ordering := range map[string]herald.Ordering{"sub_fifo": herald.OrderingFIFO, "sub_latest": herald.OrderingLatest} {
			exec(`INSERT INTO subscriptions (id, url, method, ordering, state, created_at, updated_at)
				VALUES (?, 'https://example.com/hook', 'POST', ?, 'enabled', ?, ?)`, sub, string(ordering), ms(0), ms(0))
		}
		for _, d := range []struct {
			sub, id, state string
			at             int
		}{
			// Version 4 orders by (created_at, id): b, c, a.
			{"sub_fifo", "dlv_a", "pending", 3}, {"sub_fifo", "dlv_b", "pending", 1}, {"sub_fifo", "dlv_c", "pending", 2},
			// latest: x (created at +10ms) was delivered; y (+5ms) is older.
			{"sub_latest", "dlv_x", "delivered", 10}, {"sub_latest", "dlv_y", "pending", 5},
		} {
			exec(`INSERT INTO events (id, type, key, data, delivery_count, created_at) VALUES (?, 't', 'k', '{}', 1, ?)`,
				"evt_"+d.id, ms(d.at))
			exec(`INSERT INTO deliveries (id, event_id, subscription_id, state, tier, next_attempt_at, event_key,
				created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, 'k', ?, ?)`,
				d.id, "evt_"+d.id, d.sub, d.state, ms(d.at), ms(d.at), ms(d.at))
		}
		exec(`INSERT INTO delivery_keys (subscription_id, event_key, last_pos_at, last_pos_id)
			VALUES ('sub_latest', 'k', ?, 'dlv_x')`, ms(10))
		return nil
	}))
	require.NoError(t, s.Migrate(ctx))

	// A clock far behind publishes after the migration: last anyway.
	for sub, id := range map[string]string{"sub_fifo": "dlv_d", "sub_latest": "dlv_z"} {
		at := t0.Add(-time.Hour)
		_, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: at, Events: []store.EventInsert{{
			Event:      &herald.Event{ID: "evt_" + id, Type: "t", Key: "k", Data: json.RawMessage(`{}`), CreatedAt: at},
			Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: sub, NextAttemptAt: at}},
		}}})
		require.NoError(t, err)
	}

	at := t0.Add(time.Minute)
	bySub := map[string][]string{}
	for {
		claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
			Tier: 0, Limit: 1, Now: at, LeaseOwner: "node1", LeaseUntil: at.Add(time.Minute),
		})
		require.NoError(t, err)
		if len(claimed) == 0 {
			break
		}
		d := claimed[0].Delivery
		bySub[d.SubscriptionID] = append(bySub[d.SubscriptionID], d.ID)
		_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: at, Outcomes: []store.DeliveryOutcome{{
			DeliveryID: d.ID, LeaseOwner: "node1", State: herald.DeliveryDelivered,
			Attempt: herald.Attempt{N: 1, At: at, Status: 200},
		}}})
		require.NoError(t, err)
	}
	require.Equal(t, []string{"dlv_b", "dlv_c", "dlv_a", "dlv_d"}, bySub["sub_fifo"])
	// y is skipped (not after the delivered x); z is newer than x.
	require.Equal(t, []string{"dlv_z"}, bySub["sub_latest"])
	g, err := s.DeliveryGet(ctx, "dlv_y")
	require.NoError(t, err)
	require.Equal(t, herald.DeliverySkipped, g.Delivery.State)
}
