package delivery

import (
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// Tiers are the maturity delays of the retry tiers; attempt n is made from
// tier n-1, so len(Tiers) is the number of attempts before a delivery dies.
type Tiers []time.Duration

// DefaultTiers: 0s, 5s, 1m, 10m, 1h, 6h, 24h, 24h, 24h (9 attempts over
// about 3 days and 7 hours).
var DefaultTiers = Tiers{0, 5 * time.Second, time.Minute, 10 * time.Minute, time.Hour,
	6 * time.Hour, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour}

// decision is what one attempt's result means for its delivery.
type decision struct {
	outcome store.DeliveryOutcome
	// disable is set when the endpoint answered 410 Gone.
	disable bool
	// dead is set when the delivery went to the dead letters.
	dead bool
	// pauseUntil, when set, pauses the whole subscription (a 429 or 503
	// with Retry-After): no node claims its deliveries before then.
	pauseUntil *time.Time
}

// decide turns a send result into the delivery's next state. now is when the
// attempt finished.
func decide(tiers Tiers, c *store.ClaimedDelivery, owner string, started time.Time, res webhook.Result, now time.Time) decision {
	att := herald.Attempt{
		N:               c.Attempt,
		At:              started,
		DurationMS:      res.Duration.Milliseconds(),
		Status:          res.Status,
		Error:           res.Class,
		ErrorMessage:    res.Message,
		ResponseExcerpt: res.Excerpt,
		Tier:            c.Delivery.Tier,
		RequestHeaders:  res.RequestHeaders,
		ResponseHeaders: res.ResponseHeaders,
	}
	out := store.DeliveryOutcome{
		DeliveryID: c.Delivery.ID,
		LeaseOwner: owner,
		Attempt:    att,
		Tier:       c.Delivery.Tier,
	}
	switch {
	case res.Success:
		out.State = herald.DeliveryDelivered
		return decision{outcome: out}
	case res.Class == herald.ErrorGone:
		// 410: the endpoint says it is gone for good. Disable the
		// subscription; the delivery is dead (redrivable once re-enabled).
		out.State = herald.DeliveryDead
		return decision{outcome: out, disable: true}
	}
	var pause *time.Time
	if res.RetryAfter > 0 {
		// Retry-After speaks for the endpoint, not for this one request:
		// pause the subscription, and postpone this delivery (below).
		p := now.Add(res.RetryAfter).UTC().Truncate(time.Millisecond)
		pause = &p
	}
	next := c.Delivery.Tier + 1
	if next >= len(tiers) || res.Permanent {
		out.State = herald.DeliveryDead
		return decision{outcome: out, dead: true, pauseUntil: pause}
	}
	due := now.Add(tiers[next])
	if res.RetryAfter > 0 && now.Add(res.RetryAfter).After(due) {
		due = now.Add(res.RetryAfter)
	}
	due = due.UTC().Truncate(time.Millisecond)
	out.State = herald.DeliveryPending
	out.Tier = next
	out.NextAttemptAt = &due
	return decision{outcome: out, pauseUntil: pause}
}
