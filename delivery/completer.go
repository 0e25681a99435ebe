package delivery

import (
	"context"
	"encoding/json"
	"sync"
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
}

func newCompleter(e *Engine) *completer {
	return &completer{e: e, ch: make(chan pending, 4*e.cfg.Workers), done: make(chan struct{})}
}

func (c *completer) start() { go c.run() }

func (c *completer) add(p pending) { c.ch <- p }

// stop flushes what is queued and returns. Call after every attempt ended.
func (c *completer) stop() {
	c.once.Do(func() { close(c.ch) })
	<-c.done
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
	fill:
		for len(batch) < c.e.cfg.CompleteBatch {
			select {
			case p, ok := <-c.ch:
				if !ok {
					break fill
				}
				batch = append(batch, p)
			default:
				break fill
			}
		}
		c.flush(batch)
	}
}

// flush writes one batch, retrying while the store is unavailable. If the
// process dies meanwhile, the leases expire and the deliveries are attempted
// again (duplication over loss).
func (c *completer) flush(batch []pending) {
	e := c.e
	params := &store.DeliveryCompleteManyParams{Outcomes: make([]store.DeliveryOutcome, 0, len(batch))}
	var alerts []*herald.Event
	disabling := map[string]bool{}
	retryTiers := map[int]bool{}
	freesCap := false // a max_in_flight subscription gets a slot back
	for _, p := range batch {
		params.Outcomes = append(params.Outcomes, p.decision.outcome)
		if p.claimed.Subscription != nil && p.claimed.Subscription.MaxInFlight > 0 {
			freesCap = true
		}
		if p.decision.pauseUntil != nil {
			params.PauseSubscriptions = append(params.PauseSubscriptions, store.SubscriptionPause{
				ID: p.claimed.Delivery.SubscriptionID, Until: *p.decision.pauseUntil,
			})
		}
		if p.decision.outcome.State == herald.DeliveryPending {
			retryTiers[p.decision.outcome.Tier] = true
		}
		if freesKey(p.claimed) {
			freesCap = true // the key's next delivery may wait in any tier
		}
		if p.decision.disable && !disabling[p.claimed.Subscription.ID] {
			disabling[p.claimed.Subscription.ID] = true
			params.DisableSubscriptions = append(params.DisableSubscriptions, store.SubscriptionDisable{
				ID:     p.claimed.Subscription.ID,
				Reason: "endpoint answered 410 Gone",
			})
			alerts = append(alerts, systemEvent(herald.EventTypeSubscriptionDisabled, map[string]any{
				"subscription_id": p.claimed.Subscription.ID,
				"url":             p.claimed.Subscription.URL,
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
				"url":              p.claimed.Subscription.URL,
				"attempts":         p.claimed.Attempt,
				"last_status":      p.result.Status,
				"error":            p.result.Class,
				"error_message":    p.result.Message,
				"response_excerpt": p.result.Excerpt,
			}))
		}
	}
	backoff := 50 * time.Millisecond
	start := time.Now()
	for attempt := 1; ; attempt++ {
		now := e.now()
		params.Now = now
		params.Events = nil
		if len(alerts) > 0 && e.cfg.Fanout != nil {
			if err := e.cfg.Fanout.Refresh(context.Background()); err == nil {
				ins := e.cfg.Fanout.Inserts(alerts, now, e.cfg.Tiers[0])
				for i := range ins {
					kept := ins[i].Deliveries[:0]
					for _, d := range ins[i].Deliveries {
						if !disabling[d.SubscriptionID] {
							kept = append(kept, d)
						}
					}
					ins[i].Deliveries = kept
				}
				params.Events = ins
			} else {
				e.cfg.Logger.Warn("could not route system events", "err", err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := e.cfg.Store.DeliveryCompleteMany(ctx, params)
		cancel()
		if err == nil {
			if len(res.Stale) > 0 {
				e.cfg.Logger.Warn("outcomes for deliveries whose lease was lost (another node retried them)", "count", len(res.Stale))
			}
			e.observeBatch(batch, res.Stale, time.Since(start))
			break
		}
		e.cfg.Logger.Error("could not record delivery outcomes; retrying", "count", len(params.Outcomes), "attempt", attempt, "err", err)
		if attempt >= 20 && e.claimCtx.Err() != nil {
			// Shutting down and the store is gone: leave it to lease expiry.
			return
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
	for t := range retryTiers {
		if t < len(e.tiers) {
			e.tiers[t].notify()
		}
	}
	if freesCap {
		// The store did not report these subscriptions' work as due (they
		// were at their cap): wake every tier to claim it now.
		e.Notify()
	}
	if len(params.Events) > 0 {
		e.tiers[0].notify()
	}
}

func systemEvent(typ string, data map[string]any) *herald.Event {
	b, _ := json.Marshal(data)
	return &herald.Event{Type: typ, Data: b}
}
