package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
	"github.com/heraldhq/herald/store"
)

// compiledSub is an enabled subscription ready for matching.
type compiledSub struct {
	sub        *herald.Subscription
	matcher    filter.Matcher
	wantSystem bool // has a pattern that names herald.* explicitly
	// secrets are all the subscription's secrets, newest first (direct
	// dispatch signs with the active ones).
	secrets []herald.Secret
	// pausedUntil is the subscription's pause (zero when none).
	pausedUntil time.Time
	// direct: a claim would never hold this subscription's work back
	// (ordering none, no rate limit, no in-flight cap), so a fresh delivery
	// may be sent without one, unless paused.
	direct bool
}

// directAt reports whether a fresh delivery of cs may be dispatched
// directly at now.
func (cs *compiledSub) directAt(now time.Time) bool {
	return cs.direct && !now.Before(cs.pausedUntil)
}

// activeSecrets returns the secrets that sign at now, newest first.
func (cs *compiledSub) activeSecrets(now time.Time) []herald.Secret {
	out := make([]herald.Secret, 0, len(cs.secrets))
	for _, sec := range cs.secrets {
		if sec.Active(now) {
			out = append(out, sec)
		}
	}
	return out
}

// Fanout matches events to subscriptions from a cache kept in step with the
// store's subscriptions version.
type Fanout struct {
	store  store.Store
	logger *slog.Logger

	mu      sync.RWMutex
	loaded  bool
	version int64
	subs    []compiledSub
}

// NewFanout returns a Fanout reading from s.
func NewFanout(s store.Store, logger *slog.Logger) *Fanout {
	if logger == nil {
		logger = slog.Default()
	}
	return &Fanout{store: s, logger: logger}
}

// Refresh reloads the subscriptions if the store's version moved.
func (f *Fanout) Refresh(ctx context.Context) error {
	v, err := f.store.SubscriptionsVersion(ctx)
	if err != nil {
		return fmt.Errorf("error reading subscriptions version: %w", err)
	}
	f.mu.RLock()
	fresh := f.loaded && v == f.version
	f.mu.RUnlock()
	if fresh {
		return nil
	}
	all, err := f.store.SubscriptionListAll(ctx)
	if err != nil {
		return fmt.Errorf("error loading subscriptions: %w", err)
	}
	subs := make([]compiledSub, 0, len(all.Subscriptions))
	for _, s := range all.Subscriptions {
		if s.State != herald.SubscriptionEnabled {
			continue
		}
		var m filter.Matcher
		var err error
		if !s.Filter.IsZero() {
			// A subscription without a filter gets no matcher, so events
			// that only meet such subscriptions never pay for building a
			// filter.Input (decoding data, CEL conversions).
			m, err = filter.Compile(s.Filter)
		}
		if err != nil {
			// Filters are compiled at create time, so this means a filter
			// language change made an old filter invalid. Deliver nothing
			// rather than everything, and say so.
			f.logger.Error("subscription filter does not compile; it matches nothing",
				"subscription_id", s.ID, "err", err)
			continue
		}
		o := s.Ordering
		cs := compiledSub{
			sub: s, matcher: m,
			secrets:     all.Secrets[s.ID],
			pausedUntil: all.PausedUntil[s.ID],
			direct:      (o == "" || o == herald.OrderingNone) && s.RateLimit == nil && s.MaxInFlight <= 0,
		}
		for _, p := range s.EventTypes {
			if strings.HasPrefix(p, "herald.") {
				cs.wantSystem = true
			}
		}
		subs = append(subs, cs)
	}
	f.mu.Lock()
	f.subs, f.version, f.loaded = subs, all.Version, true
	f.mu.Unlock()
	return nil
}

// Match returns the enabled subscriptions ev matches, from the cache as of
// the last Refresh.
func (f *Fanout) Match(ev *herald.Event) []*herald.Subscription {
	f.mu.RLock()
	subs := f.subs
	f.mu.RUnlock()
	matched := match(subs, ev)
	out := make([]*herald.Subscription, len(matched))
	for i, cs := range matched {
		out[i] = cs.sub
	}
	return out
}

func match(subs []compiledSub, ev *herald.Event) []*compiledSub {
	var in *filter.Input
	system := herald.IsSystemEventType(ev.Type)
	var out []*compiledSub
	for i := range subs {
		cs := &subs[i]
		if system && !cs.wantSystem {
			continue
		}
		if !herald.MatchEventType(cs.sub.EventTypes, ev.Type) {
			continue
		}
		if cs.matcher != nil {
			if in == nil {
				in = filter.NewInput(ev)
			}
			if !cs.matcher.Match(in) {
				continue
			}
		}
		out = append(out, cs)
	}
	return out
}

// Inserts builds the store inserts for events: ids and timestamps filled
// in, one pending tier-0 delivery per matching subscription. Call Refresh
// first.
func (f *Fanout) Inserts(events []*herald.Event, now time.Time, tier0Delay time.Duration) []store.EventInsert {
	out, _ := f.inserts(events, now, tier0Delay)
	return out
}

// inserts is Inserts that also returns, per event, the cached subscription
// of each delivery (same order as Deliveries).
func (f *Fanout) inserts(events []*herald.Event, now time.Time, tier0Delay time.Duration) ([]store.EventInsert, [][]*compiledSub) {
	f.mu.RLock()
	subs := f.subs
	f.mu.RUnlock()
	out := make([]store.EventInsert, len(events))
	targets := make([][]*compiledSub, len(events))
	for i, ev := range events {
		if ev.ID == "" {
			ev.ID = herald.NewID(herald.PrefixEvent)
		}
		if ev.CreatedAt.IsZero() {
			ev.CreatedAt = now
		}
		matched := match(subs, ev)
		ins := store.EventInsert{Event: ev, Deliveries: make([]store.DeliveryInsert, len(matched))}
		for j, cs := range matched {
			ins.Deliveries[j] = store.DeliveryInsert{
				ID:             herald.NewID(herald.PrefixDelivery),
				SubscriptionID: cs.sub.ID,
				NextAttemptAt:  now.Add(tier0Delay),
			}
		}
		out[i], targets[i] = ins, matched
	}
	return out, targets
}
