package store

import (
	"cmp"
	"slices"
	"time"

	"github.com/heraldhq/herald"
)

// Subscription health: every completion transaction updates, per
// subscription, one subscription_health row (one upsert statement for the
// whole batch, no extra round trip) holding
//
//   - the failure streak: consecutive failed attempts since the last
//     success and the time the streak began. Any success resets it, and so
//     does re-enabling a disabled subscription (SubscriptionUpdate). The
//     update is relative (streak + n), so two completions racing for one
//     subscription both count, whichever commits first.
//   - attempt and success counts of the current and previous UTC day
//     (HealthDay), from which SubscriptionHealthGet estimates the last 24
//     hours (HealthEstimate) without reading attempts.
//
// Every attempt counts, stale ones included: the endpoint did answer it.

// HealthUpdate is one completion batch's effect on one subscription.
type HealthUpdate struct {
	SubscriptionID string
	// Attempts and Successes count the batch's attempts for it.
	Attempts, Successes int
	// Failures counts the failed attempts after the batch's last success
	// (all of them when Successes is 0), and FailingSince is the time of
	// the first of those (zero when Failures is 0). With Successes > 0 the
	// stored streak is replaced by these; otherwise they extend it.
	Failures     int
	FailingSince time.Time
}

// HealthStreak is a subscription's failure streak after an update.
type HealthStreak struct {
	SubscriptionID      string
	ConsecutiveFailures int
	// FailingSince is zero when ConsecutiveFailures is 0.
	FailingSince time.Time
}

// SubscriptionHealthGetParams are the inputs of SubscriptionHealthGet.
type SubscriptionHealthGetParams struct {
	ID  string
	Now time.Time
}

// HealthAttempt is one attempt's part in HealthUpdates.
type HealthAttempt struct {
	SubscriptionID string
	At             time.Time
	OK             bool
}

// HealthUpdates folds attempts into one HealthUpdate per subscription,
// sorted by subscription id (backends lock the rows in that order, so two
// batches never deadlock on them). Attempts are ordered by time within a
// subscription: the streak is what follows the latest success.
func HealthUpdates(attempts []HealthAttempt) []HealthUpdate {
	if len(attempts) == 0 {
		return nil
	}
	sorted := slices.Clone(attempts)
	slices.SortStableFunc(sorted, func(a, b HealthAttempt) int {
		return cmp.Or(cmp.Compare(a.SubscriptionID, b.SubscriptionID), a.At.Compare(b.At))
	})
	var out []HealthUpdate
	for _, a := range sorted {
		if len(out) == 0 || out[len(out)-1].SubscriptionID != a.SubscriptionID {
			out = append(out, HealthUpdate{SubscriptionID: a.SubscriptionID})
		}
		u := &out[len(out)-1]
		u.Attempts++
		if a.OK {
			u.Successes++
			u.Failures, u.FailingSince = 0, time.Time{}
			continue
		}
		if u.Failures == 0 {
			u.FailingSince = a.At
		}
		u.Failures++
	}
	return out
}

// healthDayLength is the length of one counting window.
const healthDayLength = 24 * time.Hour

// HealthDay is the number of the UTC day t falls in: the counting window
// of subscription_health.
func HealthDay(t time.Time) int64 { return t.Unix() / int64(healthDayLength/time.Second) }

// HealthCounts are a subscription_health row's window counts.
type HealthCounts struct {
	Day                                       int64
	Attempts, Successes, PrevAttempts, PrevOK int64
}

// HealthEstimate fills h's 24-hour figures at now from the stored counts:
// the current day's in full plus the previous day's weighted by the part
// of it still within 24 hours (a sliding-window estimate, exact when
// attempts are spread evenly).
func HealthEstimate(h *herald.SubscriptionHealth, c HealthCounts, now time.Time) {
	today := HealthDay(now)
	var att, ok, prevAtt, prevOK float64
	switch c.Day {
	case today:
		att, ok, prevAtt, prevOK = float64(c.Attempts), float64(c.Successes), float64(c.PrevAttempts), float64(c.PrevOK)
	case today - 1:
		prevAtt, prevOK = float64(c.Attempts), float64(c.Successes)
	}
	dayStart := time.Unix(today*int64(healthDayLength/time.Second), 0)
	w := 1 - float64(now.Sub(dayStart))/float64(healthDayLength)
	att += prevAtt * w
	ok += prevOK * w
	h.Attempts24h = int64(att + 0.5)
	if att > 0 {
		r := ok / att
		h.SuccessRate24h = &r
	}
}
