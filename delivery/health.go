package delivery

import (
	"context"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Endpoint health and auto-disable (issue 24).
//
// Every completion transaction carries the batch's effect on its
// subscriptions' health (store/health.go): attempts, successes and the
// failure streak. The store answers with the streaks it left, so deciding
// costs no read. A subscription whose streak reached its rule's count and
// has lasted at least its duration (autoDisableRule) is disabled with
// reason herald.DisabledReasonFailing by the same store path a 410 Gone
// takes (DeliveryCompleteManyParams.DisableSubscriptions), conditional on
// the streak still being there, and herald.subscription.disabled is
// published for each subscription that call really disabled. Its pending
// deliveries stay pending and wait, as for any disabled subscription;
// re-enabling it (PATCH state enabled) resets the streak and they resume.
//
// That decision takes two transactions after the completion (the
// conditional disable, then the alerts), only when a streak crosses the
// rule: rare by construction. If the process dies between them the alert
// is lost but the disable stands; a store failure leaves the streak, and
// the next failed attempt's completion decides again.

// autoDisableRule returns the rule for sub (herald.AutoDisableRule): its
// failure count (0: never) and minimum streak duration.
func (e *Engine) autoDisableRule(sub *herald.Subscription) (int, time.Duration) {
	rule := herald.AutoDisableRule(e.cfg.AutoDisable, sub.AutoDisable)
	if rule == nil {
		return 0, 0
	}
	return rule.ConsecutiveFailures, time.Duration(rule.MinDurationS) * time.Second
}

// healthUpdates folds batch's attempts into per-subscription updates.
func healthUpdates(batch []pending) []store.HealthUpdate {
	attempts := make([]store.HealthAttempt, 0, len(batch))
	for _, p := range batch {
		if p.claimed.Subscription == nil {
			continue
		}
		attempts = append(attempts, store.HealthAttempt{
			SubscriptionID: p.claimed.Subscription.ID,
			At:             p.decision.outcome.Attempt.At,
			OK:             p.decision.outcome.State == herald.DeliveryDelivered,
		})
	}
	return store.HealthUpdates(attempts)
}

// failingDisable is one subscription to auto-disable.
type failingDisable struct {
	sub    *herald.Subscription
	streak store.HealthStreak
	rule   int
}

// failing returns the subscriptions of batch whose streak (from the
// completion's result) crossed their rule at now. Subscriptions a 410 in
// the same batch disabled, and those already disabled when claimed, are
// left out.
func (e *Engine) failing(batch []pending, streaks []store.HealthStreak, disabling map[string]bool, now time.Time) []failingDisable {
	if len(streaks) == 0 {
		return nil
	}
	subs := make(map[string]*herald.Subscription, len(batch))
	for _, p := range batch {
		if p.claimed.Subscription != nil {
			subs[p.claimed.Subscription.ID] = p.claimed.Subscription
		}
	}
	var out []failingDisable
	for _, st := range streaks {
		sub := subs[st.SubscriptionID]
		if sub == nil || disabling[sub.ID] || sub.State == herald.SubscriptionDisabled || st.ConsecutiveFailures == 0 {
			continue
		}
		n, after := e.autoDisableRule(sub)
		if n <= 0 || st.ConsecutiveFailures < n || now.Sub(st.FailingSince) < after {
			continue
		}
		out = append(out, failingDisable{sub: sub, streak: st, rule: n})
	}
	return out
}

// autoDisable disables the failing subscriptions and publishes an alert
// for each one it really disabled (another node or an earlier batch may
// have been first). Failures are logged: the streak stays, so the next
// failed attempt decides again.
func (e *Engine) autoDisable(failing []failingDisable, w *wakeups) {
	if len(failing) == 0 {
		return
	}
	params := &store.DeliveryCompleteManyParams{}
	for _, f := range failing {
		params.DisableSubscriptions = append(params.DisableSubscriptions, store.SubscriptionDisable{
			ID: f.sub.ID, Reason: herald.DisabledReasonFailing, MinFailures: f.rule,
		})
	}
	params.Now = e.now()
	res, err := e.storeCall(func(ctx context.Context) (*store.DeliveryCompleteManyResult, error) {
		return e.cfg.Store.DeliveryCompleteMany(ctx, params)
	})
	if err != nil {
		e.cfg.Logger.Error("could not auto-disable failing subscriptions", "count", len(failing), "err", err)
		return
	}
	done := make(map[string]bool, len(res.Disabled))
	for _, id := range res.Disabled {
		done[id] = true
	}
	var alerts []*herald.Event
	for _, f := range failing {
		if !done[f.sub.ID] {
			continue
		}
		e.cfg.Logger.Warn("auto-disabled a failing subscription",
			"subscription_id", f.sub.ID, "consecutive_failures", f.streak.ConsecutiveFailures,
			"failing_since", f.streak.FailingSince)
		alerts = append(alerts, systemEvent(herald.EventTypeSubscriptionDisabled, map[string]any{
			"subscription_id":      f.sub.ID,
			"url":                  redactURL(f.sub.URL),
			"reason":               herald.DisabledReasonFailing,
			"consecutive_failures": f.streak.ConsecutiveFailures,
			"failing_since":        f.streak.FailingSince,
			"threshold":            f.rule,
		}))
	}
	if len(alerts) == 0 || e.cfg.Fanout == nil {
		return
	}
	now := e.now()
	events, dropped, ok := e.routeAlerts(alerts, done, now)
	if !ok {
		return
	}
	if len(events) > 0 {
		_, err = e.storeCall(func(ctx context.Context) (*store.DeliveryCompleteManyResult, error) {
			return e.cfg.Store.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Events: events, Now: now})
		})
		if err != nil {
			e.cfg.Logger.Error("could not publish herald.subscription.disabled", "count", len(alerts), "err", err)
			return
		}
		w.events = true
	}
	if len(dropped) > 0 {
		e.cfg.Fanout.CountDropped(dropped)
	}
}

// storeCall runs one store write with a deadline, retrying a few times
// while the store is unavailable.
func (e *Engine) storeCall(call func(context.Context) (*store.DeliveryCompleteManyResult, error)) (*store.DeliveryCompleteManyResult, error) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := call(ctx)
		cancel()
		if err == nil || !transientStoreError(err) || attempt >= 5 {
			return res, err
		}
		time.Sleep(backoff)
		backoff *= 2
	}
}

// routeAlerts builds the inserts of herald's own alerts: every delivery
// to a subscription in excluded (being disabled) is left out, and alerts
// nobody receives are dropped (returned by type, for CountDropped once
// the rest is stored). ok is false when the routes could not be read.
func (e *Engine) routeAlerts(alerts []*herald.Event, excluded map[string]bool, now time.Time) ([]store.EventInsert, []string, bool) {
	if err := e.cfg.Fanout.Refresh(context.Background()); err != nil {
		e.cfg.Logger.Warn("could not route system events", "err", err)
		return nil, nil, false
	}
	ins := e.cfg.Fanout.Inserts(alerts, now, e.cfg.Tiers[0])
	for i := range ins {
		kept := ins[i].Deliveries[:0]
		for _, d := range ins[i].Deliveries {
			if !excluded[d.SubscriptionID] {
				kept = append(kept, d)
			}
		}
		ins[i].Deliveries = kept
	}
	events, dropped := e.cfg.Fanout.DropUnreceived(ins)
	return events, dropped, true
}
