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
		cs := compiledSub{sub: s, matcher: m}
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
	var in *filter.Input
	system := herald.IsSystemEventType(ev.Type)
	var out []*herald.Subscription
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
		out = append(out, cs.sub)
	}
	return out
}

// Inserts builds the store inserts for events: ids and timestamps filled
// in, one pending tier-0 delivery per matching subscription. Call Refresh
// first.
func (f *Fanout) Inserts(events []*herald.Event, now time.Time, tier0Delay time.Duration) []store.EventInsert {
	out := make([]store.EventInsert, len(events))
	for i, ev := range events {
		if ev.ID == "" {
			ev.ID = herald.NewID(herald.PrefixEvent)
		}
		if ev.CreatedAt.IsZero() {
			ev.CreatedAt = now
		}
		subs := f.Match(ev)
		ins := store.EventInsert{Event: ev, Deliveries: make([]store.DeliveryInsert, len(subs))}
		for j, s := range subs {
			ins.Deliveries[j] = store.DeliveryInsert{
				ID:             herald.NewID(herald.PrefixDelivery),
				SubscriptionID: s.ID,
				NextAttemptAt:  now.Add(tier0Delay),
			}
		}
		out[i] = ins
	}
	return out
}
