package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/delivery"
)

func TestHistory(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 24, 10, 0, 5, 0, time.UTC)
	h := NewHistory(func() time.Time { return clock })
	attempt := func(outcome string, latency time.Duration) {
		h.ObserveAttempt(&delivery.AttemptObservation{
			Outcome: outcome, EventCreatedAt: clock.Add(-latency), FinishedAt: clock,
		})
	}

	h.AddPublished(3)
	for range 98 {
		attempt(delivery.OutcomeDelivered, 10*time.Millisecond)
	}
	attempt(delivery.OutcomeDelivered, 2*time.Second)
	attempt(delivery.OutcomeDelivered, 2*time.Second)
	// A redriven dead letter: delivered, its hour dead not in the latency.
	for range 5 {
		h.ObserveAttempt(&delivery.AttemptObservation{
			Outcome: delivery.OutcomeDelivered, EventCreatedAt: clock.Add(-time.Hour), FinishedAt: clock, Redriven: true,
		})
	}
	attempt(delivery.OutcomeRetry, 0)
	attempt(delivery.OutcomeDead, 0)
	attempt(delivery.OutcomeGone, 0)
	h.ObserveAttempt(&delivery.AttemptObservation{Outcome: delivery.OutcomeDelivered, Stale: true})

	pts := h.Points()
	require.Len(t, pts, HistoryPoints)
	last := pts[len(pts)-1]
	require.Equal(t, time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), last.At)
	require.Equal(t, 3, last.Published)
	require.Equal(t, 105, last.Delivered)
	require.Equal(t, 1, last.Failed)
	require.Equal(t, 2, last.Dead)
	require.NotNil(t, last.LatencyP50)
	require.InDelta(t, float64(10*time.Millisecond), float64(*last.LatencyP50), float64(10*time.Millisecond)*0.16)
	require.InDelta(t, float64(2*time.Second), float64(*last.LatencyP99), float64(2*time.Second)*0.16)
	require.Nil(t, pts[0].LatencyP50, "an empty interval has no latency")
	require.True(t, pts[0].At.Before(last.At))

	// Ten seconds on: a new point; an hour on, the old one is gone.
	clock = clock.Add(HistoryInterval)
	h.AddPublished(1)
	pts = h.Points()
	require.Equal(t, 3, pts[len(pts)-2].Published)
	require.Equal(t, 1, pts[len(pts)-1].Published)
	clock = clock.Add(time.Hour)
	for _, p := range h.Points() {
		require.Zero(t, p.Published, "point %v outlived the hour", p.At)
	}
	h.AddPublished(5) // reuses a ring slot: it starts empty
	pts = h.Points()
	require.Equal(t, 5, pts[len(pts)-1].Published)
}
