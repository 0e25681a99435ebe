package delivery

import (
	"time"

	"github.com/heraldhq/herald"
)

// Attempt outcomes reported to an Observer.
const (
	OutcomeDelivered = "delivered" // 2xx: the delivery is done
	OutcomeRetry     = "retry"     // failed; moved to the next tier
	OutcomeDead      = "dead"      // failed in the last tier: a dead letter
	OutcomeGone      = "gone"      // 410: dead, and the subscription disabled
)

// AttemptObservation describes one attempt whose outcome was written.
type AttemptObservation struct {
	// Outcome is one of the Outcome constants.
	Outcome string
	// ErrorClass is the failure class ("" when delivered).
	ErrorClass herald.ErrorClass
	// Tier is the tier the attempt was made from.
	Tier int
	// Duration is how long the request took.
	Duration time.Duration
	// EventCreatedAt is when the event was published; FinishedAt when the
	// attempt ended. Their difference is the publish→delivery latency.
	EventCreatedAt time.Time
	FinishedAt     time.Time
	// Redriven is set when the delivery was put back in tier 0 after
	// attempts (a dead letter redriven): a failed attempt always moves a
	// delivery to the next tier, so tier 0 with attempts made can only be
	// a redrive. Its publish→delivery latency includes the time it lay
	// dead, so the dashboard's latency history leaves it out.
	Redriven bool
	// Stale is set when the lease had been lost: the attempt was recorded
	// but did not change the delivery's state.
	Stale bool
	// Tenant is the event's tenant ("" when untenanted), for per-tenant
	// counters.
	Tenant string
}

// Observer receives the engine's measurements. Package metrics implements
// it for Prometheus; delivery itself depends on no metrics library. It is
// called from the completer after each completion transaction commits, so
// counts reflect what is stored; methods must be cheap.
type Observer interface {
	// ObserveAttempt is called once per attempt written.
	ObserveAttempt(o *AttemptObservation)
	// ObserveCompleteBatch is called after each completion transaction
	// with its number of outcomes and its duration (retries included).
	ObserveCompleteBatch(outcomes int, took time.Duration)
	// ObserveClaim is called after each claim transaction with the number
	// of deliveries it claimed (0 included).
	ObserveClaim(claimed int)
	// ObserveDirect is called when n deliveries start by direct dispatch
	// (no claim).
	ObserveDirect(n int)
}

// NopObserver is the default Observer: it does nothing.
type NopObserver struct{}

// ObserveAttempt implements Observer.
func (NopObserver) ObserveAttempt(*AttemptObservation) {}

// ObserveCompleteBatch implements Observer.
func (NopObserver) ObserveCompleteBatch(int, time.Duration) {}

// ObserveClaim implements Observer.
func (NopObserver) ObserveClaim(int) {}

// ObserveDirect implements Observer.
func (NopObserver) ObserveDirect(int) {}

// observeBatch reports a committed batch; stale lists lease-lost ids.
func (e *Engine) observeBatch(batch []pending, stale []string, took time.Duration) {
	obs := e.cfg.Observer
	obs.ObserveCompleteBatch(len(batch), took)
	var staleSet map[string]bool
	if len(stale) > 0 {
		staleSet = make(map[string]bool, len(stale))
		for _, id := range stale {
			staleSet[id] = true
		}
	}
	for _, p := range batch {
		o := &AttemptObservation{
			ErrorClass:     p.result.Class,
			Tier:           p.decision.outcome.Attempt.Tier,
			Duration:       p.result.Duration,
			EventCreatedAt: p.claimed.Event.CreatedAt,
			FinishedAt:     p.decision.outcome.Attempt.At.Add(p.result.Duration),
			Stale:          staleSet[p.decision.outcome.DeliveryID],
			Redriven:       p.claimed.Delivery.Tier == 0 && p.claimed.Delivery.AttemptCount > 0,
			Tenant:         p.claimed.Event.Tenant,
		}
		switch {
		case p.decision.disable:
			o.Outcome = OutcomeGone
		case p.decision.outcome.State == herald.DeliveryDelivered:
			o.Outcome = OutcomeDelivered
		case p.decision.outcome.State == herald.DeliveryDead:
			o.Outcome = OutcomeDead
		case p.decision.outcome.State == herald.DeliveryPending:
			o.Outcome = OutcomeRetry
		default:
			o.Outcome = string(p.decision.outcome.State)
		}
		obs.ObserveAttempt(o)
	}
}
