package delivery

import (
	"context"
	"time"

	"github.com/heraldhq/herald/store"
)

// lateStartLimit bounds how long after its claim a rate-limited delivery's
// request may start.
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

// releaseLate gives back a rate-limited delivery whose claim started at
// claimedAt (the start the store recorded) when it is too late to start it
// now (see lateStartLimit) and reports whether it did.
func (e *Engine) releaseLate(c *store.ClaimedDelivery, claimedAt time.Time) bool {
	if c.Subscription == nil || c.Subscription.RateLimit == nil {
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
		e.cfg.Logger.Warn("could not give back a rate-limited delivery started too late; its lease will expire",
			"delivery_id", c.Delivery.ID, "err", err)
	} else {
		e.cfg.Logger.Debug("rate-limited delivery not sent: it would start too long after its claim",
			"delivery_id", c.Delivery.ID, "late", late)
	}
	return true
}
