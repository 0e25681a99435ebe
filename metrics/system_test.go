package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// herald_system_events_dropped_total reads 0 per system type before the
// first drop, and counts drops by type.
func TestSystemEventsDropped(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	o := NewObserver(reg)
	require.Equal(t, 3, testutil.CollectAndCount(o.systemDropped))
	o.ObserveSystemEventDropped(herald.EventTypeDeliveryDead)
	o.ObserveSystemEventDropped(herald.EventTypeDeliveryDead)
	o.ObserveSystemEventDropped(herald.EventTypeQueueStale)
	require.InDelta(t, 2, testutil.ToFloat64(o.systemDropped.WithLabelValues(herald.EventTypeDeliveryDead)), 0)
	require.InDelta(t, 1, testutil.ToFloat64(o.systemDropped.WithLabelValues(herald.EventTypeQueueStale)), 0)
	require.InDelta(t, 0, testutil.ToFloat64(o.systemDropped.WithLabelValues(herald.EventTypeSubscriptionDisabled)), 0)
}
