package store

import (
	"math"
	"time"

	"github.com/heraldhq/herald"
)

// Throttling: the rule, stated once here; the backends point to it.
//
// A subscription with RateLimit, MaxInFlight > 0 or a pause in effect is
// throttled; every backend enforces it in DeliveryClaim, across all nodes
// sharing the store:
//
//   - rate_limit: the claim is the request start. A claim records one start
//     per claimed delivery and never lets more than RateLimit.Max starts fall
//     in any window of PerSeconds + ThrottleMargin (RateWindow; a sliding
//     window). Starts are recorded in non-decreasing time order per
//     subscription (each at the later of the claim's start and the newest
//     start recorded), even when claimers' Now values interleave. The
//     margin covers the gap between the claim and the HTTP request starting
//     (a claim at t starts its request in [t, t+margin): goroutine start,
//     signing, dial), so the receiver never sees more than Max starts in any
//     PerSeconds window: Max+1 starts inside one PerSeconds window would
//     need Max+1 claims inside PerSeconds + margin.
//   - max_in_flight: a claim never leaves more than MaxInFlight deliveries
//     of the subscription in_flight (all tiers, all nodes). The in-flight
//     count is of the deliveries whose start is recorded and that are still
//     in_flight (a start is kept while its delivery is in flight).
//   - pause: a subscription whose paused_until (set by
//     DeliveryCompleteManyParams.PauseSubscriptions) is after Now is not
//     claimed at all.
//
// ThrottleState.Budget turns these into how many more requests a
// subscription may start now. Throttled deliveries stay pending where they
// are (no attempt is used) and their subscription takes no claim slot while
// it has no budget: the rest of the Limit goes to other subscriptions (the
// fairness rule, store/claim.go, counts a throttled subscription with what
// its budget lets it take). A subscription with none of these settings
// costs nothing extra on the claim path. On PostgreSQL the claimers of one
// throttled subscription are serialized by a row lock, so two nodes cannot
// both spend its last budget; SQLite's single writer serializes them.

// ThrottleMargin widens the rate window of throttled subscriptions (see
// the rule above).
const ThrottleMargin = 100 * time.Millisecond

// RateWindow is the window in which at most RateLimit.Max starts of a
// subscription limited to Max per perSeconds may fall: perSeconds +
// ThrottleMargin. With perSeconds 0 (no rate limit) it is the margin alone,
// which is how long a backend keeps start rows for the in-flight count.
func RateWindow(perSeconds int) time.Duration {
	return time.Duration(perSeconds)*time.Second + ThrottleMargin
}

// Reasons a pending delivery waits because of its subscription's throttle
// (see the rule above); DeliveryWaitingFor reports them.
const (
	// WaitingForPaused: the subscription is paused by a Retry-After.
	WaitingForPaused WaitingFor = "paused"
	// WaitingForRateLimit: the subscription spent its rate_limit budget.
	WaitingForRateLimit WaitingFor = "rate_limit"
	// WaitingForInFlightCap: the subscription has max_in_flight requests
	// running.
	WaitingForInFlightCap WaitingFor = "in_flight_cap"
)

// ThrottleState is one subscription's throttle settings with what a backend
// counted for it at a moment: the inputs of the budget rule.
type ThrottleState struct {
	// PausedUntil is the subscription's paused_until (zero: none).
	PausedUntil time.Time
	// RateLimit is nil when the rate is not limited.
	RateLimit *herald.RateLimit
	// MaxInFlight <= 0 means no in-flight cap.
	MaxInFlight int
	// Started counts the recorded starts in the rate window ending at now
	// (after now - RateWindow). Only read with a RateLimit.
	Started int
	// MaxthStart is the RateLimit.Max-th newest of those starts: budget
	// returns when it leaves the window. Only read when Started >= Max.
	MaxthStart time.Time
	// InFlight counts the deliveries started and still in flight. Only read
	// with a MaxInFlight.
	InFlight int
}

// Budget is how many more requests the subscription may start at now
// (math.MaxInt when unlimited, 0 while paused), why it may start none
// ("" when it may start some), and, when a pause or the rate limit is the
// reason, when budget returns by time alone (zero when only a completion
// frees it: at max_in_flight). A pause wins over the rate limit, which wins
// over the in-flight cap, as the reason.
func (st *ThrottleState) Budget(now time.Time) (budget int, why WaitingFor, returns time.Time) {
	if st.PausedUntil.After(now) {
		return 0, WaitingForPaused, st.PausedUntil
	}
	budget = math.MaxInt
	if rl := st.RateLimit; rl != nil {
		if left := rl.Max - st.Started; left <= 0 {
			budget, why, returns = 0, WaitingForRateLimit, st.MaxthStart.Add(RateWindow(rl.PerSeconds))
		} else {
			budget = left
		}
	}
	if st.MaxInFlight > 0 {
		if left := st.MaxInFlight - st.InFlight; left <= 0 {
			if why == "" {
				why = WaitingForInFlightCap
			}
			budget = 0
		} else {
			budget = min(budget, left)
		}
	}
	return budget, why, returns
}
