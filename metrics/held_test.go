package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/metrics"
	"github.com/heraldhq/herald/store"
)

// Every tier the store reports is exported, a tier no longer configured
// included, with its held count beside its due count.
func TestStatsCollectorHeldAndRemovedTiers(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStatsCollector(&statsStore{stats: store.Stats{Tiers: []store.TierStats{
		{Tier: 0, Pending: 3, Due: 1, Held: 2}, {Tier: 1}, {Tier: 2, Pending: 4, Due: 4},
	}}}, 2))
	fams := gather(t, reg)
	require.Equal(t, float64(1), value(t, fams, "herald_queue_due", map[string]string{"tier": "0"}))
	require.Equal(t, float64(2), value(t, fams, "herald_queue_held", map[string]string{"tier": "0"}))
	require.Equal(t, float64(4), value(t, fams, "herald_queue_due", map[string]string{"tier": "2"}))
}
