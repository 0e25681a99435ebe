package metrics_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/metrics"
	"github.com/heraldhq/herald/store"
)

// statsStore answers StatsGet only.
type statsStore struct {
	store.Store
	stats store.Stats
}

func (s *statsStore) StatsGet(context.Context, *store.StatsGetParams) (*store.Stats, error) {
	st := s.stats
	return &st, nil
}

func TestStatsCollectorThrottled(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStatsCollector(&statsStore{stats: store.Stats{Throttled: 7}}, 1))
	require.Equal(t, float64(7), value(t, gather(t, reg), "herald_queue_throttled", nil))
}
