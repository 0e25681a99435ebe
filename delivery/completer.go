package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// pending is one decided attempt waiting to be written.
type pending struct {
	decision decision
	claimed  *store.ClaimedDelivery
	result   webhook.Result
}

// completer writes outcomes in batches: whatever accumulated while the
// previous transaction ran goes into the next one.
type completer struct {
	e    *Engine
	ch   chan pending
	done chan struct{}
	once sync.Once
	// lastBatch is when the previous batch's first outcome arrived (only
	// run's goroutine touches it): a steady flow of outcomes is one
	// whose batches start less than steadyGap apart (gather).
	lastBatch time.Time
	// While a steady batch waits (napping, gatherSteady) it does not
	// receive each outcome as it comes: add leaves it in ch and pokes only
	// for an outcome that frees a waiter or once ch holds need outcomes
	// (what the batch has room for). Receiving each one woke the
	// completer, and a second thread, for every delivery (issue 26).
	napping atomic.Bool
	need    atomic.Int64
	poke    chan struct{}
}

// steadyGap: batches starting less than SteadyCompleteWait + steadyGap
// apart make a steady flow — an outcome within 50 ms of the previous
// batch's wait ending, about 20 outcomes a second or more — whose next
// batch waits SteadyCompleteWait for company even when no other request is
// running. The wait is part of the gap: a steady batch starts at least
// SteadyCompleteWait after the one before, so a gap shorter than the wait
// would make every other batch of a steady flow look unsteady.
const steadyGap = 50 * time.Millisecond

func newCompleter(e *Engine) *completer {
	return &completer{e: e, ch: make(chan pending, 4*e.cfg.Workers), done: make(chan struct{}), poke: make(chan struct{}, 1)}
}

func (c *completer) start() { go c.run() }

// add queues p for the next batch. A full queue pokes a napping batch
// before add blocks on it; after the send, add pokes it for an outcome
// that frees a waiter (urgent) or once the batch is full. napping is read
// after the send and gatherSteady drains after setting it, so an outcome
// that does not see the nap is taken by that drain.
func (c *completer) add(p pending) {
	select {
	case c.ch <- p:
	default:
		c.wake()
		c.ch <- p
	}
	if c.napping.Load() && (freesWaiter(p.claimed) || int64(len(c.ch)) >= c.need.Load()) {
		c.wake()
	}
}

// wake pokes a napping batch (gatherSteady); a poke already pending is
// enough.
func (c *completer) wake() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// stop flushes what is queued and returns. Call after every attempt ended.
func (c *completer) stop() {
	c.closeQueue()
	<-c.done
}

// closeQueue ends the queue: run flushes what is left and returns, and a
// napping batch wakes.
func (c *completer) closeQueue() {
	c.once.Do(func() {
		close(c.ch)
		c.wake()
	})
}

func (c *completer) run() {
	defer close(c.done)
	batch := make([]pending, 0, c.e.cfg.CompleteBatch)
	for {
		p, ok := <-c.ch
		if !ok {
			return
		}
		batch = append(batch[:0], p)
		now := time.Now()
		steady := now.Sub(c.lastBatch) < max(c.e.cfg.SteadyCompleteWait, 0)+steadyGap
		c.lastBatch = now
		batch, _ = c.takeQueued(batch, false)
		batch = c.gather(batch, steady)
		c.flush(batch)
	}
}

// gather waits up to CompleteWait for more outcomes to join batch, while
// other requests are running (their outcomes are coming) and nothing in
// the batch frees an ordered key or a max_in_flight slot (the next
// delivery waits for that write). Each completion transaction rewrites the
// same index pages, so fewer, larger ones cost less per delivery
// (measured in docs/benchmarks.md: a third of the transactions at full
// load), and the wait adds nothing to a delivery's latency: its request
// was already answered.
//
// In a steady flow (steady: the previous batch started less than
// SteadyCompleteWait + steadyGap before this one) it waits up to SteadyCompleteWait even when
// no other request is running: at 1,000 deliveries/s each request is over
// in a millisecond, so "others are running" was rarely true and nearly
// every outcome was a transaction of its own (measured: 1.3 outcomes per
// completion transaction on SQLite at 1,000/s, issue 26). A lone outcome
// after a quiet spell is still written at once.
func (c *completer) gather(batch []pending, steady bool) []pending {
	if len(batch) >= c.e.cfg.CompleteBatch || c.urgent(batch) {
		return batch
	}
	if steady && c.e.cfg.SteadyCompleteWait > max(c.e.cfg.CompleteWait, 0) {
		return c.gatherSteady(batch, c.e.cfg.SteadyCompleteWait)
	}
	wait := c.e.cfg.CompleteWait
	if wait <= 0 {
		return batch
	}
	var timer *time.Timer
	for len(batch) < c.e.cfg.CompleteBatch && c.e.Inflight() > 1 {
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case p, ok := <-c.ch:
			if !ok {
				return batch
			}
			batch = append(batch, p)
			if c.urgent(batch[len(batch)-1:]) {
				return batch
			}
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// gatherSteady is gather in a steady flow: it takes what is queued, then
// naps until wait ends or add pokes it (an outcome that frees a waiter, a
// full batch, a full queue, stop), and takes what is queued again.
func (c *completer) gatherSteady(batch []pending, wait time.Duration) []pending {
	c.napping.Store(true)
	defer c.napping.Store(false)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		var done bool
		if batch, done = c.takeQueued(batch, true); done {
			return batch
		}
		c.need.Store(int64(min(c.e.cfg.CompleteBatch-len(batch), cap(c.ch))))
		select {
		case <-c.poke:
		case <-timer.C:
			batch, _ = c.takeQueued(batch, false)
			return batch
		}
	}
}

// takeQueued adds what is queued to batch without waiting, up to
// CompleteBatch. done says the batch is to be written now: it is full, the
// queue is closed, or (untilUrgent) the last outcome taken frees a waiter.
func (c *completer) takeQueued(batch []pending, untilUrgent bool) (_ []pending, done bool) {
	for len(batch) < c.e.cfg.CompleteBatch {
		select {
		case p, ok := <-c.ch:
			if !ok {
				return batch, true
			}
			batch = append(batch, p)
			if untilUrgent && freesWaiter(p.claimed) {
				return batch, true
			}
		default:
			return batch, false
		}
	}
	return batch, true
}

// urgent reports whether an outcome in batch frees what another delivery
// waits for (freesWaiter).
func (c *completer) urgent(batch []pending) bool {
	for _, p := range batch {
		if freesWaiter(p.claimed) {
			return true
		}
	}
	return false
}

// freesWaiter reports whether c's outcome frees what another delivery may
// wait for: a max_in_flight slot of its subscription, or its ordered key.
func freesWaiter(c *store.ClaimedDelivery) bool {
	return (c.Subscription != nil && c.Subscription.MaxInFlight > 0) || freesKey(c)
}

// flush writes one batch. A transient store failure
// (herald.ErrStoreUnavailable, a deadline) is retried with backoff: the
// batch is fine, the store is not. If the process dies meanwhile, the leases
// expire and the deliveries are attempted again (duplication over loss).
//
// Any other failure means the store refused something in the batch, and one
// refused row fails the whole transaction: the batch is split in halves,
// each written on its own, until the bad outcome stands alone. That one is
// written once more with its texts cleaned (herald.CleanLine/CleanText);
// if the store refuses it still, it is dropped and its lease expiry makes
// the delivery pending again. So one bad outcome costs about 2·log2(batch)
// extra transactions and never holds up the others, and no batch is retried
// forever.
func (c *completer) flush(batch []pending) {
	w := &wakeups{retryTiers: map[int]bool{}}
	_ = c.write(batch, time.Now(), true, w) // abandoned: left to lease expiry
	w.apply(c.e)
}

// wakeups collects which loops to wake once a flush is written.
type wakeups struct {
	retryTiers map[int]bool
	// freesCap: a max_in_flight subscription got a slot back, or an ordered
	// key was freed (its next delivery may wait in any tier).
	freesCap bool
	events   bool // system events were inserted (tier 0)
}

func (w *wakeups) apply(e *Engine) {
	for t := range w.retryTiers {
		if t < len(e.tiers) {
			e.tiers[t].notify()
		}
	}
	if w.freesCap {
		// The store did not report these subscriptions' work as due (they
		// were at their cap): wake every tier to claim it now.
		e.Notify()
	}
	if w.events {
		e.tiers[0].notify()
	}
}

// write writes batch, splitting it when the store refuses it (see flush).
// It returns errCompleteAbandoned when it gave up on shutdown (the rest of
// the flush is given up too), nil otherwise.
func (c *completer) write(batch []pending, start time.Time, top bool, w *wakeups) error {
	e := c.e
	err := c.commit(batch, start, w)
	if err == nil || errors.Is(err, errCompleteAbandoned) {
		return err
	}
	if len(batch) > 1 {
		if top {
			e.cfg.Logger.Warn("the store refused a batch of delivery outcomes; writing it in parts to isolate the refused one",
				"count", len(batch), "err", err)
		}
		mid := len(batch) / 2
		if err := c.write(batch[:mid], start, false, w); err != nil {
			return err
		}
		return c.write(batch[mid:], start, false, w)
	}
	p := batch[0]
	id := p.decision.outcome.DeliveryID
	if clean, changed := cleanPending(p); changed {
		refused := err
		err = c.commit([]pending{clean}, start, w)
		switch {
		case err == nil:
			e.cfg.Logger.Warn("recorded a delivery outcome with its error message and response excerpt cleaned",
				"delivery_id", id, "err", refused)
			return nil
		case errors.Is(err, errCompleteAbandoned):
			return err
		}
	}
	e.cfg.Logger.Error("the store refused a delivery outcome; dropped it, the delivery is attempted again once its lease expires",
		"delivery_id", id, "err", err)
	return nil
}

// errCompleteAbandoned: the store stayed unavailable while shutting down;
// the outcomes are left to lease expiry.
var errCompleteAbandoned = errors.New("outcomes abandoned on shutdown")

// transientStoreError reports an error that says nothing about the rows
// written: the store did not answer (in time).
func transientStoreError(err error) bool {
	return errors.Is(err, herald.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// cleanMessageLimit bounds an error message cleaned here (the bound
// webhook.Sender keeps).
const cleanMessageLimit = 256

// cleanPending returns p with the attempt's outside texts cleaned hard, and
// whether that changed anything.
func cleanPending(p pending) (pending, bool) {
	msg := herald.CleanLine(p.result.Message, cleanMessageLimit)
	exc := herald.CleanText(p.result.Excerpt, herald.ResponseExcerptLimit)
	att := &p.decision.outcome.Attempt
	amsg := herald.CleanLine(att.ErrorMessage, cleanMessageLimit)
	aexc := herald.CleanText(att.ResponseExcerpt, herald.ResponseExcerptLimit)
	changed := msg != p.result.Message || exc != p.result.Excerpt || amsg != att.ErrorMessage || aexc != att.ResponseExcerpt
	p.result.Message, p.result.Excerpt = msg, exc
	att.ErrorMessage, att.ResponseExcerpt = amsg, aexc
	return p, changed
}

// commit writes batch in one transaction, retrying while the store is
// unavailable. It returns nil once written, errCompleteAbandoned when it
// gave up on shutdown, and the store's error when the store refused the
// batch.
func (c *completer) commit(batch []pending, start time.Time, w *wakeups) error {
	e := c.e
	params := &store.DeliveryCompleteManyParams{Outcomes: make([]store.DeliveryOutcome, 0, len(batch))}
	var alerts []*herald.Event
	disabling := map[string]bool{}
	freesCap := false
	for _, p := range batch {
		params.Outcomes = append(params.Outcomes, p.decision.outcome)
		if p.decision.pauseUntil != nil {
			params.PauseSubscriptions = append(params.PauseSubscriptions, store.SubscriptionPause{
				ID: p.claimed.Delivery.SubscriptionID, Until: *p.decision.pauseUntil,
			})
		}
		// A freed max_in_flight slot or ordered key: the next delivery may
		// wait in any tier.
		freesCap = freesCap || freesWaiter(p.claimed)
		if p.decision.disable && !disabling[p.claimed.Subscription.ID] {
			disabling[p.claimed.Subscription.ID] = true
			params.DisableSubscriptions = append(params.DisableSubscriptions, store.SubscriptionDisable{
				ID:     p.claimed.Subscription.ID,
				Reason: "endpoint answered 410 Gone",
			})
			alerts = append(alerts, systemEvent(herald.EventTypeSubscriptionDisabled, map[string]any{
				"subscription_id": p.claimed.Subscription.ID,
				"url":             redactURL(p.claimed.Subscription.URL),
				"reason":          "endpoint answered 410 Gone",
				"delivery_id":     p.claimed.Delivery.ID,
				"status":          p.result.Status,
			}))
		}
		if p.decision.dead && !herald.IsSystemEventType(p.claimed.Event.Type) {
			alerts = append(alerts, systemEvent(herald.EventTypeDeliveryDead, map[string]any{
				"delivery_id":      p.claimed.Delivery.ID,
				"event_id":         p.claimed.Event.ID,
				"event_type":       p.claimed.Event.Type,
				"subscription_id":  p.claimed.Subscription.ID,
				"url":              redactURL(p.claimed.Subscription.URL),
				"attempts":         p.claimed.Attempt,
				"last_status":      p.result.Status,
				"error":            p.result.Class,
				"error_message":    p.result.Message,
				"response_excerpt": p.result.Excerpt,
			}))
		}
	}
	// The health of the batch's subscriptions rides in the same
	// transaction (delivery/health.go).
	params.Health = healthUpdates(batch)
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		now := e.now()
		params.Now = now
		params.Events = nil
		var dropped []string
		if len(alerts) > 0 && e.cfg.Fanout != nil {
			// Alerts nobody receives are counted, not stored.
			params.Events, dropped, _ = e.routeAlerts(alerts, disabling, now)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := e.cfg.Store.DeliveryCompleteMany(ctx, params)
		cancel()
		if err == nil {
			if len(dropped) > 0 {
				e.cfg.Fanout.CountDropped(dropped)
			}
			if len(res.Stale) > 0 {
				e.cfg.Logger.Warn("outcomes for deliveries whose lease was lost (another node retried them)", "count", len(res.Stale))
			}
			e.observeBatch(batch, res.Stale, time.Since(start))
			for _, o := range params.Outcomes {
				if o.State == herald.DeliveryPending {
					w.retryTiers[o.Tier] = true
				}
			}
			w.freesCap = w.freesCap || freesCap
			w.events = w.events || len(params.Events) > 0
			e.autoDisable(e.failing(batch, res.Health, disabling, now), w)
			return nil
		}
		if !transientStoreError(err) {
			return err
		}
		e.cfg.Logger.Error("could not record delivery outcomes; retrying", "count", len(params.Outcomes), "attempt", attempt, "err", err)
		if attempt >= 20 && e.claimCtx != nil && e.claimCtx.Err() != nil {
			// Shutting down and the store is gone: leave it to lease expiry.
			return errCompleteAbandoned
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// redactURL is a subscription URL fit for herald's own events, which every
// herald.* subscriber receives: without the userinfo, query and fragment,
// where endpoints commonly carry credentials (https://user:pass@host/,
// ?token=...). The subscription id names the subscription exactly.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "" // stored URLs parse; never echo one that does not
	}
	u.User = nil
	u.RawQuery, u.ForceQuery = "", false
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

func systemEvent(typ string, data map[string]any) *herald.Event {
	b, _ := json.Marshal(data)
	return &herald.Event{Type: typ, Data: b}
}
