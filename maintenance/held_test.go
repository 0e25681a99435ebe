package maintenance_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/maintenance"
	"github.com/heraldhq/herald/store"
)

// A backlog no claim can take — a disabled or paused subscription's —
// raises no herald.queue.stale: the workers are not behind (issue 10,
// items 4 and 5). Work a claim can take still does.
func TestQueueStaleIgnoresHeldWork(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		clk := &clock{now: t0}
		ing := ingest.New(ingest.Config{Store: s, Now: clk.Now})
		disabled := createSub(t, s, "off.*")
		paused := createSub(t, s, "wait.*")
		alarm := createSub(t, s, herald.EventTypeQueueStale)
		m := maintenance.New(maintenance.Config{
			Store: s, Publisher: ing, Tiers: 2, StaleAfter: 5 * time.Minute, Now: clk.Now,
		})
		_, err := ing.PublishMany(ctx, []*herald.Event{
			{Type: "off.one", Data: json.RawMessage(`{}`)}, {Type: "wait.one", Data: json.RawMessage(`{}`)},
		})
		require.NoError(t, err)
		off := *disabled
		off.State, off.DisabledReason = herald.SubscriptionDisabled, "endpoint gone"
		_, err = s.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: &off, Now: t0})
		require.NoError(t, err)
		_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0,
			PauseSubscriptions: []store.SubscriptionPause{{ID: paused.ID, Until: t0.Add(time.Hour)}}})
		require.NoError(t, err)

		clk.Set(t0.Add(30 * time.Minute))
		require.NoError(t, m.CheckStale(ctx))
		require.Empty(t, alarms(t, s, alarm.ID))

		// Claimable work that waits as long is stale.
		createSub(t, s, "app.*")
		clk.Set(t0.Add(40 * time.Minute))
		_, err = ing.PublishMany(ctx, []*herald.Event{{Type: "app.created", Data: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		clk.Set(t0.Add(46 * time.Minute))
		require.NoError(t, m.CheckStale(ctx))
		got := alarms(t, s, alarm.ID)
		require.Len(t, got, 1)
		require.Equal(t, map[string]any{
			"tier": 0.0, "oldest_pending_age_s": 360.0, "pending": 3.0, "due": 1.0, "threshold_s": 300.0,
		}, got[0])
	})
}

// cancelCounter counts DeliveryCancelOrphaned calls.
type cancelCounter struct {
	store.Store
	calls atomic.Int64
}

func (c *cancelCounter) DeliveryCancelOrphaned(ctx context.Context, p *store.DeliveryCancelOrphanedParams) (int, error) {
	c.calls.Add(1)
	return c.Store.DeliveryCancelOrphaned(ctx, p)
}

// The leader sweeps deliveries of deleted subscriptions every
// SweepInterval, retention configured or not.
func TestOrphanSweepRuns(t *testing.T) {
	t.Parallel()
	s := &cancelCounter{Store: testdb.SQLite(t)}
	m := maintenance.New(maintenance.Config{Store: s, SweepInterval: 10 * time.Millisecond})
	m.Start()
	t.Cleanup(m.Stop)
	require.Eventually(t, func() bool { return s.calls.Load() >= 2 }, 10*time.Second, 5*time.Millisecond)
}

// Every node sweeps orphans once as it starts, without waiting for a
// SweepInterval (or leadership): a crash inside a subscription delete is
// repaired by the restart.
func TestOrphanSweepAtStart(t *testing.T) {
	t.Parallel()
	s := &cancelCounter{Store: testdb.SQLite(t)}
	m := maintenance.New(maintenance.Config{Store: s, SweepInterval: time.Hour})
	m.Start()
	t.Cleanup(m.Stop)
	require.Eventually(t, func() bool { return s.calls.Load() >= 1 }, 10*time.Second, 5*time.Millisecond)
}
