package metrics_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/metrics"
	"github.com/heraldhq/herald/store"
)

// countingPushStore counts PushStats calls (each a full count of the push
// tables).
type countingPushStore struct {
	store.PushStore
	counts atomic.Int64
}

func (s *countingPushStore) PushStats(ctx context.Context) (*store.PushStats, error) {
	s.counts.Add(1)
	return s.PushStore.PushStats(ctx)
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestPushStatsNotCountedPerScrape (issue 20, item 9): /metrics counted
// every push table on every scrape (publish p50 1 s with 3 M channels and
// 8 scrapers). Many scrapes within an interval now cost one count, and a
// stale scrape starts one refresh in the background.
func TestPushStatsNotCountedPerScrape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.SQLite(t)
	ps := &countingPushStore{PushStore: s.(store.PushStore)}
	clk := &clock{now: time.Now()}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewPushStatsCollectorWith(ps, metrics.PushStatsConfig{Interval: time.Minute, Now: clk.Now}))

	users := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "herald_push_users" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no herald_push_users")
		return 0
	}
	for range 50 {
		require.Zero(t, users())
	}
	require.EqualValues(t, 1, ps.counts.Load(), "50 scrapes, one count")

	require.NoError(t, ps.PushUserCreate(ctx, &store.PushUserCreateParams{UAID: "00000000000000000000000000000001", ConnectedAt: 1, Now: time.Now()}))
	clk.Advance(59 * time.Second)
	require.Zero(t, users(), "within the interval: the counts of the last refresh")
	require.EqualValues(t, 1, ps.counts.Load())

	clk.Advance(time.Second)
	n, err := testutil.GatherAndCount(reg, "herald_push_users", "herald_push_channels", "herald_push_stored_messages")
	require.NoError(t, err)
	require.Equal(t, 3, n, "a stale scrape still answers at once")
	deadline := time.Now().Add(5 * time.Second)
	for users() != 1 {
		require.True(t, time.Now().Before(deadline), "the background refresh did not land")
		time.Sleep(5 * time.Millisecond)
	}
	require.EqualValues(t, 2, ps.counts.Load(), "one refresh per interval")
}
