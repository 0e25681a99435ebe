package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// publishAt stores one event of key with one delivery for sub, inserted
// by a node whose clock reads at; it returns the delivery id.
func publishAt(ctx context.Context, t *testing.T, s store.Store, sub, key, id string, at time.Time) string {
	t.Helper()
	_, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: at, Events: []store.EventInsert{{
		Event:      &herald.Event{ID: "evt_" + id, Type: "t", Key: key, Data: json.RawMessage(`{}`), CreatedAt: at},
		Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: sub, NextAttemptAt: at}},
	}}})
	require.NoError(t, err)
	return id
}

// claimDeliver claims one delivery of the tier and delivers it; it
// returns its id ("" when nothing was claimed).
func claimDeliver(ctx context.Context, t *testing.T, s store.Store, at time.Time) string {
	t.Helper()
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: 1, Now: at, LeaseOwner: "node1", LeaseUntil: at.Add(time.Minute),
	})
	require.NoError(t, err)
	if len(claimed) == 0 {
		return ""
	}
	require.Len(t, claimed, 1)
	_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: at, Outcomes: []store.DeliveryOutcome{{
		DeliveryID: claimed[0].Delivery.ID, LeaseOwner: "node1", State: herald.DeliveryDelivered,
		Attempt: herald.Attempt{N: 1, At: at, Status: 200},
	}}})
	require.NoError(t, err)
	return claimed[0].Delivery.ID
}

// TestMigratePublishOrder: migration 006 rewrites no table (each keeps its
// file), the deliveries it finds keep their order ((created_at, id)) before
// every delivery stored after it, and a key's last delivered position from
// before compares as before with the old rows and older than every new one.
func TestMigratePublishOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, schema := openAtVersion(ctx, t, 5)

	// The rows a version-5 herald left, written as it wrote them (raw
	// SQL: today's store code may need columns of later migrations).
	conn := schemaConn(ctx, t, schema)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, q, args...)
		require.NoError(t, err)
	}
	fifo, latest := "sub_fifo", "sub_latest"
	for sub, ordering := range map[string]herald.Ordering{fifo: herald.OrderingFIFO, latest: herald.OrderingLatest} {
		exec(`INSERT INTO subscriptions (id, url, method, ordering, state, created_at, updated_at)
			VALUES ($1, 'https://example.com/hook', 'POST', $2, 'enabled', $3, $3)`, sub, string(ordering), t0)
	}
	old := func(sub, id string, createdAt time.Time, state herald.DeliveryState) string {
		t.Helper()
		exec(`INSERT INTO events (id, type, key, data, created_at, delivery_count) VALUES ($1, 't', 'k', '{}', $2, 1)`,
			"evt_"+id, createdAt)
		var next *time.Time
		if state == herald.DeliveryPending {
			next = &createdAt
		}
		exec(`INSERT INTO deliveries (id, event_id, subscription_id, state, tier, next_attempt_at, event_key,
			created_at, updated_at) VALUES ($1, $2, $3, $4, 0, $5, 'k', $6, $6)`,
			id, "evt_"+id, sub, string(state), next, createdAt)
		return id
	}
	ms := time.Millisecond
	// Version 5 orders by (created_at, id): b, c, a.
	a := old(fifo, "dlv_a", t0.Add(3*ms), herald.DeliveryPending)
	bb := old(fifo, "dlv_b", t0.Add(ms), herald.DeliveryPending)
	c := old(fifo, "dlv_c", t0.Add(2*ms), herald.DeliveryPending)
	// latest: x (created at +10ms) was delivered; y (+5ms) is older.
	x := old(latest, "dlv_x", t0.Add(10*ms), herald.DeliveryDelivered)
	y := old(latest, "dlv_y", t0.Add(5*ms), herald.DeliveryPending)
	exec(`INSERT INTO delivery_keys (subscription_id, event_key, last_pos_at, last_pos_id)
		VALUES ($1, 'k', $2, $3)`, latest, t0.Add(10*ms), x)

	files := func() map[string]uint32 {
		out := map[string]uint32{}
		for _, rel := range []string{"deliveries_active", "deliveries_done", "delivery_keys"} {
			var n uint32
			require.NoError(t, conn.QueryRow(ctx, "SELECT pg_relation_filenode($1::regclass)::oid", rel).Scan(&n))
			out[rel] = n
		}
		return out
	}
	before := files()
	require.NoError(t, s.Migrate(ctx))
	require.Equal(t, before, files(), "no table rewritten")

	// A node whose clock is far behind publishes after the migration:
	// last, whatever its created_at.
	d := publishAt(ctx, t, s, fifo, "k", "dlv_d", t0.Add(-time.Hour))
	z := publishAt(ctx, t, s, latest, "k", "dlv_z", t0.Add(-time.Hour))

	at := t0.Add(time.Minute)
	var got []string
	for id := claimDeliver(ctx, t, s, at); id != ""; id = claimDeliver(ctx, t, s, at) {
		got = append(got, id)
	}
	// y is skipped (not after the delivered x); z is newer than x.
	require.ElementsMatch(t, []string{bb, c, a, d, z}, got)
	var fifoOrder []string
	for _, id := range got {
		if id != z {
			fifoOrder = append(fifoOrder, id)
		}
	}
	require.Equal(t, []string{bb, c, a, d}, fifoOrder)
	g, err := s.DeliveryGet(ctx, y)
	require.NoError(t, err)
	require.Equal(t, herald.DeliverySkipped, g.Delivery.State)
}
