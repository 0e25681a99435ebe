package delivery

import (
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Direct dispatch: the ingester inserts fresh tier-0 deliveries already
// leased to this node and hands them to the engine after the commit, so
// they are sent without a claim transaction and without waiting for a tier
// loop to wake (see docs/adr/0004-direct-dispatch.md). The engine allows it
// only while tier 0 is drained — no pending tier-0 delivery is waiting for a
// claim, so fresh work does not overtake older work — and only into free
// tier-0 slots, so the worker count still caps concurrent requests.
//
// *Engine implements ingest.Dispatcher with DispatchReserve,
// DispatchLease, DispatchStart and DispatchCancel.

// DispatchReserve reserves up to n tier-0 slots for deliveries about to be
// inserted leased, and returns how many it reserved (0 while tier 0 has
// claimable backlog, when no slot is free, or when the engine is not
// running). Every reservation must end in DispatchStart or DispatchCancel.
func (e *Engine) DispatchReserve(n int) int {
	if n <= 0 || !e.started.Load() {
		return 0
	}
	e.dispatchMu.RLock()
	defer e.dispatchMu.RUnlock()
	if e.claimCtx.Err() != nil {
		return 0
	}
	t := e.tiers[0]
	if !t.drained.Load() {
		return 0
	}
	got := t.reserve(int64(n))
	if got > 0 {
		e.inflightAll.Add(got)
		e.work.Add(int(got))
	}
	return int(got)
}

// DispatchLease returns the lease owner and lease end a delivery of sub
// inserted at now must carry: the same lease a claim would grant.
func (e *Engine) DispatchLease(sub *herald.Subscription, now time.Time) (string, time.Time) {
	return e.cfg.NodeID, now.Add(max(herald.DefaultTimeout, sub.Timeout()) + e.cfg.LeaseMargin)
}

// DispatchStart starts committed, leased deliveries, one per reservation.
func (e *Engine) DispatchStart(ds []*store.ClaimedDelivery, now time.Time) {
	if len(ds) > 0 {
		e.cfg.Observer.ObserveDirect(len(ds))
	}
	jobs := make([]job, len(ds))
	for i, c := range ds {
		jobs[i] = job{c: c, at: now}
	}
	e.start(e.tiers[0], jobs)
}

// DispatchCancel gives back n reservations that were not started (the
// commit failed, or the event was a duplicate).
func (e *Engine) DispatchCancel(n int) {
	if n <= 0 {
		return
	}
	t := e.tiers[0]
	t.inflight.Add(int64(-n))
	e.inflightAll.Add(int64(-n))
	e.work.Add(-n)
	t.signal()
}
