package delivery

import (
	"context"
	"time"

	"github.com/heraldhq/herald/store"
)

// The run queue. A tier holds up to capacity() deliveries: one running per
// worker, and as many again claimed and waiting for a worker in memory.
// Without it a tier whose workers are all busy claims again on every freed
// worker, one or two deliveries per claim transaction (measured: 3.6
// deliveries per claim at full load, 22% of the node's CPU in claims). With
// it a busy tier claims only when its queue is half empty, so a claim takes
// about a worker count of deliveries, and a worker that finishes starts
// the next queued delivery at once, without waiting for a claim.
//
// Queued deliveries are leased to this node like running ones. The queue
// is as long as the tier's worker count, so a queued delivery waits for at
// most one request of each worker ahead of it; one whose lease would no
// longer cover its request when a worker takes it is given back unsent
// (staleLease), and one whose start is bounded (rate limit, key interval:
// startBound) is queued ahead of the others and given back when it could
// not start within lateStartLimit (releaseLate).
// Stop gives back whatever is still queued.

// job is a claimed (or directly dispatched) delivery and when it was
// claimed.
type job struct {
	c  *store.ClaimedDelivery
	at time.Time
}

// start runs jobs on free workers and queues the rest. Each job holds one
// unit of the tier's inflight, one of e.inflightAll and one of e.work.
func (e *Engine) start(t *tierRunner, jobs []job) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, j := range jobs {
		if t.running < t.slots.Load() || t.running == 0 {
			t.running++
			go e.run(t, j)
			continue
		}
		if startBound(j.c) {
			t.urgent = append(t.urgent, j)
		} else {
			t.queue.push(j)
		}
	}
}

// pump starts workers for queued jobs while the tier has free workers (its
// slots grew).
func (e *Engine) pump(t *tierRunner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.running < t.slots.Load() {
		j, ok := t.pop()
		if !ok {
			return
		}
		t.running++
		go e.run(t, j)
	}
}

// pop takes the next queued job. The caller holds t.mu.
func (t *tierRunner) pop() (job, bool) {
	var j job
	switch {
	case len(t.urgent) > 0:
		j = t.urgent[0]
		t.urgent[0] = job{}
		t.urgent = t.urgent[1:]
	default:
		return t.queue.pop()
	}
	return j, true
}

// queued is the number of jobs waiting for a worker.
func (t *tierRunner) queued() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.urgent) + t.queue.len()
}

// run is one worker: it attempts j, then queued jobs, until the queue is
// empty or the tier has more workers than slots (the last worker stays
// while jobs are queued, so none is stranded when a rebalance takes every
// slot).
func (e *Engine) run(t *tierRunner, j job) {
	for {
		e.attempt(t, j.c, j.at)
		t.mu.Lock()
		if t.running > t.slots.Load() && t.running > 1 {
			t.running--
			t.mu.Unlock()
			return
		}
		next, ok := t.pop()
		if !ok {
			t.running--
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		j = next
	}
}

// hungry reports whether a tier with a backlog should claim now: its queue
// is at most half full, or nothing waits for a worker that is free.
func (t *tierRunner) hungry() bool {
	room := t.room()
	if room <= 0 {
		return false
	}
	return room >= max(1, t.slots.Load()/2) || t.queued() == 0
}

// staleLease reports whether c's lease would end before its request could
// time out and its outcome be recorded (it waited in the queue too long),
// and if so gives it back unsent: a request sent now could be sent again
// by another node once the lease ends.
func (e *Engine) staleLease(c *store.ClaimedDelivery) bool {
	if c.LeaseUntil.IsZero() || c.Subscription == nil {
		return false
	}
	need := c.Subscription.Timeout() + e.cfg.LeaseMargin/2
	if c.LeaseUntil.Sub(e.cfg.Now()) >= need {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.cfg.Store.DeliveryRelease(ctx, &store.DeliveryReleaseParams{
		IDs: []string{c.Delivery.ID}, LeaseOwner: e.cfg.NodeID, Now: e.now(),
	}); err != nil {
		e.cfg.Logger.Warn("could not give back a delivery that waited too long for a worker; its lease will expire",
			"delivery_id", c.Delivery.ID, "err", err)
	} else {
		e.cfg.Logger.Info("delivery waited too long for a worker; given back unsent", "delivery_id", c.Delivery.ID)
		e.Notify()
	}
	return true
}

// releaseQueued empties every tier's queue into e.released (Stop: the
// loops have ended, so nothing is queued after this).
func (e *Engine) releaseQueued() {
	for _, t := range e.tiers {
		t.mu.Lock()
		var ids []string
		for {
			j, ok := t.pop()
			if !ok {
				break
			}
			ids = append(ids, j.c.Delivery.ID)
		}
		t.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		e.releasedMu.Lock()
		e.released = append(e.released, ids...)
		e.releasedMu.Unlock()
		n := int64(len(ids))
		t.inflight.Add(-n)
		e.inflightAll.Add(-n)
		e.work.Add(-len(ids))
	}
}
