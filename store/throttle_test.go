package store_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func TestRateWindow(t *testing.T) {
	require.Equal(t, time.Second+store.ThrottleMargin, store.RateWindow(1))
	require.Equal(t, store.ThrottleMargin, store.RateWindow(0), "no rate limit: the margin alone")
}

func TestThrottleBudget(t *testing.T) {
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	rate := func(max, per int) *herald.RateLimit { return &herald.RateLimit{Max: max, PerSeconds: per} }
	maxth := now.Add(-300 * time.Millisecond)
	cases := []struct {
		name    string
		st      store.ThrottleState
		budget  int
		why     store.WaitingFor
		returns time.Time
	}{
		{"unthrottled", store.ThrottleState{}, math.MaxInt, "", time.Time{}},
		{"pause ended", store.ThrottleState{PausedUntil: now}, math.MaxInt, "", time.Time{}},
		{"paused", store.ThrottleState{PausedUntil: now.Add(time.Second), RateLimit: rate(5, 1)},
			0, store.WaitingForPaused, now.Add(time.Second)},
		{"paused wins over the rate", store.ThrottleState{PausedUntil: now.Add(time.Second), RateLimit: rate(1, 1), Started: 1, MaxthStart: maxth},
			0, store.WaitingForPaused, now.Add(time.Second)},
		{"rate untouched", store.ThrottleState{RateLimit: rate(5, 1)}, 5, "", time.Time{}},
		{"rate partly spent", store.ThrottleState{RateLimit: rate(5, 1), Started: 3}, 2, "", time.Time{}},
		{"rate spent", store.ThrottleState{RateLimit: rate(3, 2), Started: 3, MaxthStart: maxth},
			0, store.WaitingForRateLimit, maxth.Add(2*time.Second + store.ThrottleMargin)},
		{"rate overspent", store.ThrottleState{RateLimit: rate(3, 1), Started: 5, MaxthStart: maxth},
			0, store.WaitingForRateLimit, maxth.Add(time.Second + store.ThrottleMargin)},
		{"in flight free", store.ThrottleState{MaxInFlight: 4, InFlight: 1}, 3, "", time.Time{}},
		{"in flight full", store.ThrottleState{MaxInFlight: 2, InFlight: 2}, 0, store.WaitingForInFlightCap, time.Time{}},
		{"in flight over", store.ThrottleState{MaxInFlight: 2, InFlight: 3}, 0, store.WaitingForInFlightCap, time.Time{}},
		{"both: the smaller", store.ThrottleState{RateLimit: rate(10, 1), Started: 4, MaxInFlight: 3, InFlight: 1}, 2, "", time.Time{}},
		{"both: rate smaller", store.ThrottleState{RateLimit: rate(10, 1), Started: 9, MaxInFlight: 3}, 1, "", time.Time{}},
		{"both spent: the rate is the reason", store.ThrottleState{RateLimit: rate(2, 1), Started: 2, MaxthStart: maxth, MaxInFlight: 1, InFlight: 1},
			0, store.WaitingForRateLimit, maxth.Add(time.Second + store.ThrottleMargin)},
		{"cap spent, rate left", store.ThrottleState{RateLimit: rate(2, 1), Started: 1, MaxInFlight: 1, InFlight: 1},
			0, store.WaitingForInFlightCap, time.Time{}},
		{"counts ignored without settings", store.ThrottleState{Started: 100, InFlight: 100}, math.MaxInt, "", time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			budget, why, returns := tc.st.Budget(now)
			require.Equal(t, tc.budget, budget)
			require.Equal(t, tc.why, why)
			require.True(t, tc.returns.Equal(returns), "returns %v, want %v", returns, tc.returns)
		})
	}
}
