package store

import (
	"time"

	"github.com/heraldhq/herald"
)

// DeliveryClaimParams are the inputs of DeliveryClaim.
//
// Fairness: the claim is water-filled over the subscriptions that have due
// work in the tier, each one share whatever its ordering (a fifo or latest
// subscription's keys decide only which of its deliveries it takes). If k
// subscriptions have due work, no subscription receives more than
// ceil(Limit/k) deliveries while another that has more due work received
// fewer than its share, and no two differ by more than one unless the one
// with fewer got all it could: what one cannot take (fewer due, keys
// taken, no throttle budget, store/throttle.go) goes to the others. So one
// subscription with 10,000 due deliveries cannot keep a second
// subscription's single due delivery out of a claim. Within a
// subscription, earliest next_attempt_at first (ties by id). Backends must
// do this in time proportional to (subscriptions with work + Limit), not
// to the backlog.
type DeliveryClaimParams struct {
	Tier       int
	Limit      int
	Now        time.Time
	LeaseOwner string
	// LeaseUntil and LeaseMargin give each delivery its lease: see
	// LeaseFor.
	LeaseUntil  time.Time
	LeaseMargin time.Duration
	// RotateAfter makes claims round-robin across subscriptions. Among
	// candidates of equal per-subscription rank, those whose subscription
	// id is > RotateAfter come first (by subscription id), then the rest
	// (wrap-around). The caller passes the subscription it served last, so
	// even claims of Limit 1 (one free slot) visit every subscription with
	// due work in turn instead of always the one with the oldest backlog.
	RotateAfter string
	// Clock is when the claim really starts. A claim may wait, after the
	// caller took Now, for what serializes it with other claims (SQLite's
	// writer, PostgreSQL's throttle row locks); the backend reads Clock at
	// most once inside the claim transaction, after it holds those locks
	// and before it commits (PostgreSQL: only when it takes a key or
	// claimed rate-limited deliveries), and records the request starts of throttled
	// subscriptions (the rate window, store/throttle.go) at that value
	// rather than at Now, so a slow claim neither starts requests long
	// after their recorded start nor has them given back as late. A value
	// before Now counts as Now. nil means Now (tests stay deterministic).
	// Due times and leases still use Now; a key's last send is recorded at
	// the claim's start (KeySentAt). It is called before DeliveryClaim
	// returns, on the caller's goroutine, at most once. See ClaimStart.
	Clock func() time.Time

	// start is Clock's value once ClaimStart read it: one value per
	// claim, so a key's last send, the throttle's recorded start and the
	// caller's lateness check agree (see ClaimStart).
	start     time.Time
	startRead bool
}

// LeaseFor is the lease a claim grants a delivery of sub: the later of
// LeaseUntil and Now + the subscription's timeout + LeaseMargin, so a long
// timeout never outlives its lease. (PostgreSQL's claimSQL computes the
// same per row, from @lease_until, @default_timeout_ms and @margin_ms.)
func (p *DeliveryClaimParams) LeaseFor(sub *herald.Subscription) time.Time {
	lease := p.Now.Add(sub.Timeout() + p.LeaseMargin)
	if p.LeaseUntil.After(lease) {
		return p.LeaseUntil
	}
	return lease
}

// ClaimStart is the claim's start for its rate window (backend helper):
// Clock's value, or Now when Clock is nil or says earlier. Backends call
// it once the claim holds its locks. Clock is read on the first call only;
// later calls in the same claim return that value, so every key a claim
// takes and every throttled start it records carry the one start the
// caller measures lateness from. (PostgreSQL once read it per key chunk
// and again for the throttle: a key's send was recorded up to a busy
// transaction's length before the start the engine bounded, and two sends
// of a key started 887 ms apart under a 1 s interval, TestSourceGovUK.)
// A params value is for one DeliveryClaim call.
func (p *DeliveryClaimParams) ClaimStart() time.Time {
	if p.Clock == nil {
		return p.Now
	}
	if !p.startRead {
		p.start, p.startRead = p.Clock(), true
	}
	if p.start.After(p.Now) {
		return p.start
	}
	return p.Now
}

// KeySentAt is the send time a claim records for a key it takes (the key
// interval of "fifo"/"latest" subscriptions counts from it): the claim's
// start, read when the key's write runs, not Now. A claim that waited for
// the writer or for locks starts its requests after Now; recording Now
// would let the key's next send start less than the interval after this
// one (seen: 837 ms for a 1 s interval, TestSourceGovUK). Whether a key
// may send is still judged at Now, which is never later: spacing errs
// long, never short.
func (p *DeliveryClaimParams) KeySentAt() time.Time { return p.ClaimStart() }

// ClaimedDelivery is everything a worker needs to make one attempt without
// further reads.
type ClaimedDelivery struct {
	Delivery     *herald.Delivery
	Event        *herald.Event
	Subscription *herald.Subscription
	// Secrets are the subscription's secrets active at claim time, newest
	// first.
	Secrets []herald.Secret
	// Attempt is the 1-based number of the attempt about to be made
	// (Delivery.AttemptCount + 1).
	Attempt int
	// LeaseUntil is the lease granted (LeaseFor).
	LeaseUntil time.Time
}

// DeliveryNextDueParams are the inputs of DeliveryNextDue.
type DeliveryNextDueParams struct {
	Tier int
	// Now decides which throttled subscriptions have budget (rate windows,
	// pauses). Required.
	Now time.Time
}
