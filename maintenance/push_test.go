package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/maintenance"
	"github.com/heraldhq/herald/metrics"
	"github.com/heraldhq/herald/store"
)

// TestSweepPush: expired messages and idle user agents go, in rounds, on
// both stores; counts reach herald_retention_deleted_total and the push
// gauges.
func TestSweepPush(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		ps := s.(store.PushStore)
		now := time.Now().UTC().Truncate(time.Millisecond)
		mk := func(uaid, chid string, lastConnect time.Time, ttl time.Duration) {
			require.NoError(t, ps.PushUserCreate(ctx, &store.PushUserCreateParams{UAID: uaid, ConnectedAt: 1, Now: lastConnect}))
			require.NoError(t, ps.PushChannelAdd(ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid, Now: now}))
			_, err := ps.PushMessageSave(ctx, &store.PushMessageSaveParams{UAID: uaid, Messages: []*store.PushMessage{{
				ID: herald.NewID(herald.PrefixPushMessage), UAID: uaid, ChannelID: chid, TTL: int(ttl.Seconds()),
				CreatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-time.Hour).Add(ttl),
			}}})
			require.NoError(t, err)
		}
		mk("00000000000000000000000000000001", "00000000-0000-4000-8000-000000000001", now, time.Minute)                       // expired message
		mk("00000000000000000000000000000002", "00000000-0000-4000-8000-000000000002", now, 2*time.Hour)                       // kept
		mk("00000000000000000000000000000003", "00000000-0000-4000-8000-000000000003", now.Add(-61*24*time.Hour), 2*time.Hour) // idle

		reg := prometheus.NewRegistry()
		obs := metrics.NewObserver(reg)
		reg.MustRegister(metrics.NewPushStatsCollector(ps))
		m := maintenance.New(maintenance.Config{Store: s, PushIdleExpiry: maintenance.DefaultPushIdleExpiry, Observer: obs, Now: func() time.Time { return now }})
		res, err := m.SweepPush(ctx, ps)
		require.NoError(t, err)
		require.Equal(t, &store.PushRetentionSweepResult{Messages: 1, Users: 1}, res)
		require.Equal(t, 1.0, counterValue(t, reg, "herald_retention_deleted_total", "push_users"))
		require.Equal(t, 1.0, counterValue(t, reg, "herald_retention_deleted_total", "push_messages"))
		st, err := ps.PushStats(ctx)
		require.NoError(t, err)
		require.Equal(t, &store.PushStats{Users: 2, Channels: 2, Messages: 1}, st)
		n, err := testutil.GatherAndCount(reg, "herald_push_stored_messages", "herald_push_users", "herald_push_channels")
		require.NoError(t, err)
		require.Equal(t, 3, n)

		// 0 keeps idle user agents.
		mk("00000000000000000000000000000004", "00000000-0000-4000-8000-000000000004", now.Add(-400*24*time.Hour), 2*time.Hour)
		m = maintenance.New(maintenance.Config{Store: s, Now: func() time.Time { return now }})
		res, err = m.SweepPush(ctx, ps)
		require.NoError(t, err)
		require.Zero(t, res.Users)
	})
}

// counterValue reads name{kind=kind} from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{kind=%q}", name, kind)
	return 0
}
