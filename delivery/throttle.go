package delivery

import (
	"context"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// lateStartLimit bounds how long after its claim a rate-limited delivery's
// request may start (and a keyed one's under a key interval: startBound).
//
// The store counts a rate-limited subscription's starts over PerSeconds +
// store.ThrottleMargin, taking as the start the claim's clock read inside
// its transaction once it holds its locks (DeliveryClaimParams.Clock), so
// time spent waiting for SQLite's writer or a PostgreSQL throttle lock is
// not counted against the request. That keeps the receiver within Max
// starts per PerSeconds only while every request starts within the margin
// of that start. Normally it starts within a millisecond or two, but an
// overloaded process can push it later. A request that would start later
// than this is not sent: the delivery is given back without an attempt
// (its start stays counted, so the budget is lost, never exceeded) and is
// claimed again when budget returns. Half the margin is kept for the sender
// to reach the wire.
const lateStartLimit = store.ThrottleMargin / 2

// startBound reports whether c's request must start within lateStartLimit
// of its claim's start: the store counted that start against a rate limit
// (store/throttle.go), or recorded it as the last send of c's key, from
// which the key interval of a fifo or latest subscription counts (the
// next send of the key may start one interval after it, so a request
// started late would bring the two closer than the interval). Such
// deliveries are also started before others when workers are short
// (runqueue.go).
func startBound(c *store.ClaimedDelivery) bool {
	sub := c.Subscription
	if sub == nil {
		return false
	}
	if sub.RateLimit != nil {
		return true
	}
	ordered := sub.Ordering == herald.OrderingFIFO || sub.Ordering == herald.OrderingLatest
	return ordered && sub.KeyIntervalMS > 0 && c.Delivery.EventKey != ""
}

// releaseLate gives back a delivery whose start is bounded (startBound)
// and whose claim started at claimedAt (the start the store recorded) when
// it is too late to start it now (see lateStartLimit) and reports whether
// it did. A key's recorded send stays: its next send waits a full interval
// from the start that did not happen (spacing errs long).
func (e *Engine) releaseLate(c *store.ClaimedDelivery, claimedAt time.Time) bool {
	if !startBound(c) {
		return false
	}
	late := e.cfg.Now().Sub(claimedAt)
	if late <= lateStartLimit {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := e.cfg.Store.DeliveryRelease(ctx, &store.DeliveryReleaseParams{
		IDs: []string{c.Delivery.ID}, LeaseOwner: e.cfg.NodeID, Now: e.now(),
	})
	if err != nil {
		e.cfg.Logger.Warn("could not give back a delivery started too late; its lease will expire",
			"delivery_id", c.Delivery.ID, "err", err)
	} else {
		e.cfg.Logger.Debug("delivery not sent: it would start too long after its claim (rate limit or key interval)",
			"delivery_id", c.Delivery.ID, "late", late)
	}
	return true
}
