package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/metrics"
)

func TestHistoryView(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	h := metrics.NewHistory(func() time.Time { return clock })
	h.AddPublished(7)
	v := historyView{h}
	require.Equal(t, metrics.HistoryInterval, v.Interval())
	require.Equal(t, clock, v.Started(), "intervals before the start are unknown")
	got := v.Points()
	require.Len(t, got, metrics.HistoryPoints)
	last := got[len(got)-1]
	require.Equal(t, clock, last.At)
	require.Equal(t, 7, last.Published)
}
