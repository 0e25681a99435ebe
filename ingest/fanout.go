package ingest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
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
// store's two versions (store.SubscriptionsVersions): when the
// subscriptions version moved it reloads every subscription, recompiling
// only the filters that changed; when only the pauses version moved (a
// Retry-After) it reloads the pauses alone.
//
// Several goroutines refresh one Fanout (each committer, and the completer
// routing system events). Concurrent refreshes that need the same or an
// older version share one load, and a load installs only what is newer
// than the cache, so a slow load never takes the cache back in time.
type Fanout struct {
	store  store.Store
	logger *slog.Logger
	// compile builds a filter's matcher (filter.Compile; tests count
	// calls).
	compile func(*herald.Filter) (filter.Matcher, error)
	// system counts the herald.* events dropped for want of a receiver
	// (nil: not counted); set before use.
	system SystemEventObserver

	mu sync.RWMutex
	// loaded: subscriptions were installed once (version is then valid).
	loaded bool
	// version is what the cache holds: the subscriptions version of subs
	// and the pauses version of pauses, each only ever moving forward.
	version store.SubscriptionsVersions
	// subs are the enabled subscriptions, with pausedUntil from pauses:
	// replaced, never modified, so readers may keep a slice they read.
	subs   []compiledSub
	pauses map[string]time.Time
	// matchers are the compiled filters of subs by subscription id, reused
	// by the next load for subscriptions whose filter is unchanged.
	matchers map[string]compiledFilter
	// loads are the loads in progress (at most a few: a new one starts only
	// when none of these was started late enough to serve the caller).
	loads []*fanoutLoad
}

// compiledFilter is one subscription's filter and what compiling it gave.
type compiledFilter struct {
	filter  herald.Filter
	matcher filter.Matcher
	err     error
}

// fanoutLoad is one reload in progress, shared by every Refresh it serves.
type fanoutLoad struct {
	// target is the version read by the Refresh that started it: the load
	// reads a snapshot at least as new, so it serves any Refresh that read
	// target or older.
	target store.SubscriptionsVersions
	// full reloads every subscription; otherwise only the pauses.
	full bool
	done chan struct{} // closed when err and abandoned are set
	err  error
	// abandoned: the starter's ctx ended; those waiting try again rather
	// than fail with another caller's cancellation.
	abandoned bool
}

// NewFanout returns a Fanout reading from s.
func NewFanout(s store.Store, logger *slog.Logger) *Fanout {
	if logger == nil {
		logger = slog.Default()
	}
	return &Fanout{store: s, logger: logger, compile: filter.Compile}
}

// covers reports whether the cache is at least as new as v. Call with mu
// held.
func (f *Fanout) covers(v store.SubscriptionsVersions) bool {
	return f.loaded && f.version.Subscriptions >= v.Subscriptions && f.version.Pauses >= v.Pauses
}

// Refresh brings the cache up to at least the store's current versions:
// when it returns nil, every subscription change and pause committed before
// the call is in the cache.
func (f *Fanout) Refresh(ctx context.Context) error {
	v, err := f.store.SubscriptionsVersion(ctx)
	if err != nil {
		return fmt.Errorf("error reading subscriptions version: %w", err)
	}
	for {
		f.mu.Lock()
		if f.covers(v) {
			f.mu.Unlock()
			return nil
		}
		var load *fanoutLoad
		for _, l := range f.loads {
			if l.target.Subscriptions >= v.Subscriptions && l.target.Pauses >= v.Pauses {
				load = l
				break
			}
		}
		if load == nil {
			// Subscriptions current (and loaded): the pauses alone moved.
			full := !f.loaded || f.version.Subscriptions < v.Subscriptions
			load = &fanoutLoad{target: v, full: full, done: make(chan struct{})}
			f.loads = append(f.loads, load)
			f.mu.Unlock()
			f.run(ctx, load)
			if load.err != nil {
				return load.err
			}
			continue // installed: covers v now
		}
		f.mu.Unlock()
		select {
		case <-load.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if load.err != nil && !load.abandoned {
			return load.err
		}
	}
}

// run performs load, installs what it read if newer than the cache, and
// lets those waiting for it go.
func (f *Fanout) run(ctx context.Context, load *fanoutLoad) {
	if load.full {
		load.err = f.loadAll(ctx)
	} else {
		load.err = f.loadPauses(ctx)
	}
	load.abandoned = load.err != nil && ctx.Err() != nil
	f.mu.Lock()
	for i, l := range f.loads {
		if l == load {
			f.loads = append(f.loads[:i], f.loads[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	close(load.done)
}

// loadAll reads every subscription and installs them, and the pauses read
// with them, where newer than the cache.
func (f *Fanout) loadAll(ctx context.Context) error {
	all, err := f.store.SubscriptionListAll(ctx)
	if err != nil {
		return fmt.Errorf("error loading subscriptions: %w", err)
	}
	f.mu.RLock()
	prev := f.matchers
	f.mu.RUnlock()
	subs, matchers := f.compileAll(all, prev)

	f.mu.Lock()
	defer f.mu.Unlock()
	pauses := f.pauses
	if !f.loaded || all.PausesVersion > f.version.Pauses {
		pauses, f.version.Pauses = all.PausedUntil, all.PausesVersion
	}
	if !f.loaded || all.Version > f.version.Subscriptions {
		f.version.Subscriptions, f.matchers, f.loaded = all.Version, matchers, true
	} else {
		subs = f.subs // a newer load installed them meanwhile
	}
	f.install(subs, pauses)
	return nil
}

// loadPauses reads the pauses alone and installs them if newer than the
// cache's.
func (f *Fanout) loadPauses(ctx context.Context) error {
	res, err := f.store.SubscriptionPauseList(ctx)
	if err != nil {
		return fmt.Errorf("error loading subscription pauses: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if res.Version > f.version.Pauses {
		f.version.Pauses = res.Version
		f.install(f.subs, res.PausedUntil)
	}
	return nil
}

// install makes subs, with their pauses set from pauses, what Match reads.
// It copies subs: readers may still hold the slice it replaces. Call with
// mu held.
func (f *Fanout) install(subs []compiledSub, pauses map[string]time.Time) {
	out := make([]compiledSub, len(subs))
	for i, cs := range subs {
		cs.pausedUntil = pauses[cs.sub.ID]
		out[i] = cs
	}
	f.subs, f.pauses = out, pauses
}

// compileAll builds the enabled subscriptions of all (without pauses) and
// their compiled filters, taking each from prev when its filter did not
// change: a reload compiles only new and edited filters.
func (f *Fanout) compileAll(all *store.SubscriptionListAllResult, prev map[string]compiledFilter) ([]compiledSub, map[string]compiledFilter) {
	subs := make([]compiledSub, 0, len(all.Subscriptions))
	matchers := make(map[string]compiledFilter, len(prev))
	for _, s := range all.Subscriptions {
		if s.State != herald.SubscriptionEnabled {
			continue
		}
		var m filter.Matcher
		if !s.Filter.IsZero() {
			// A subscription without a filter gets no matcher, so events
			// that only meet such subscriptions never pay for building a
			// filter.Input (decoding data, CEL conversions).
			c, ok := prev[s.ID]
			if !ok || !sameFilter(&c.filter, s.Filter) {
				c = compiledFilter{filter: *s.Filter}
				c.matcher, c.err = f.compile(s.Filter)
				if c.err != nil {
					// Filters are compiled at create time, so this means a
					// filter language change made an old filter invalid.
					// Deliver nothing rather than everything, and say so
					// (once: the failure is kept like a matcher).
					f.logger.Error("subscription filter does not compile; it matches nothing",
						"subscription_id", s.ID, "err", c.err)
				}
			}
			matchers[s.ID] = c
			if c.err != nil {
				continue
			}
			m = c.matcher
		}
		o := s.Ordering
		cs := compiledSub{
			sub: s, matcher: m,
			secrets:    all.Secrets[s.ID],
			direct:     (o == "" || o == herald.OrderingNone) && s.RateLimit == nil && s.MaxInFlight <= 0,
			wantSystem: s.WantsSystemEvents(),
		}
		subs = append(subs, cs)
	}
	return subs, matchers
}

// sameFilter reports whether a and b are the same filter text, so one's
// matcher serves the other. The filter is what a matcher depends on: an
// edit that leaves it alone (a new URL, a pause) recompiles nothing, and
// two edits in the same millisecond cannot share a stale matcher as they
// could if keyed by updated_at.
func sameFilter(a, b *herald.Filter) bool {
	return a.CEL == b.CEL && a.JMESPath == b.JMESPath && bytes.Equal(a.ESQuery, b.ESQuery)
}

// SystemEventObserver is implemented by observers that count the herald.*
// system events not stored because no subscription receives them
// (metrics.Observer: herald_system_events_dropped_total).
type SystemEventObserver interface {
	ObserveSystemEventDropped(eventType string)
}

// SetSystemEventObserver makes f report each system event it drops to o.
// Call it before f is used.
func (f *Fanout) SetSystemEventObserver(o SystemEventObserver) { f.system = o }

// DropUnreceived removes from inserts the herald.* system events without a
// delivery: no subscription receives them, and stored they would only
// crowd the event list (every dead letter raises a herald.delivery.dead).
// It returns the inserts kept, in order (inserts' array reused), and the
// types dropped: pass them to CountDropped once the rest is stored, so a
// retried commit does not count twice.
func (f *Fanout) DropUnreceived(inserts []store.EventInsert) ([]store.EventInsert, []string) {
	kept := inserts[:0]
	var dropped []string
	for _, in := range inserts {
		if unreceived(&in) {
			dropped = append(dropped, in.Event.Type)
			continue
		}
		kept = append(kept, in)
	}
	return kept, dropped
}

// CountDropped reports system events DropUnreceived dropped to the
// SystemEventObserver.
func (f *Fanout) CountDropped(types []string) {
	if f.system == nil {
		return
	}
	for _, t := range types {
		f.system.ObserveSystemEventDropped(t)
	}
}

// unreceived reports whether in is a system event nobody receives.
func unreceived(in *store.EventInsert) bool {
	return len(in.Deliveries) == 0 && herald.IsSystemEventType(in.Event.Type)
}

// dropUnreceived is DropUnreceived for the ingester, keeping targets in
// step. kept holds, in order, the input index of each insert left; it is
// nil when nothing was dropped.
func (f *Fanout) dropUnreceived(inserts []store.EventInsert, targets [][]*compiledSub) ([]store.EventInsert, [][]*compiledSub, []int, []string) {
	var (
		kept    []int
		dropped []string
	)
	for n := range inserts {
		if unreceived(&inserts[n]) {
			dropped = append(dropped, inserts[n].Event.Type)
			if kept == nil {
				kept = make([]int, 0, len(inserts))
				for k := range n {
					kept = append(kept, k)
				}
			}
			continue
		}
		if kept != nil {
			kept = append(kept, n)
		}
	}
	if kept == nil {
		return inserts, targets, nil, nil
	}
	outIns := make([]store.EventInsert, len(kept))
	outTargets := make([][]*compiledSub, len(kept))
	for j, n := range kept {
		outIns[j], outTargets[j] = inserts[n], targets[n]
	}
	return outIns, outTargets, kept, dropped
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
	var out []*compiledSub
	for i := range subs {
		cs := &subs[i]
		if filter.Delivers(cs.sub, cs.wantSystem, cs.matcher, ev, &in) {
			out = append(out, cs)
		}
	}
	return out
}

// Inserts builds the store inserts for events: ids and timestamps filled
// in, one pending tier-0 delivery per matching subscription. Call Refresh
// first.
func (f *Fanout) Inserts(events []*herald.Event, now time.Time, tier0Delay time.Duration) []store.EventInsert {
	out, _, _ := f.inserts(events, now, tier0Delay)
	return out
}

// inserts is Inserts that also returns, per event, the cached subscription
// of each delivery (same order as Deliveries), and the versions of the
// cache it matched against (nil before the first load): what
// store.EventInsertManyParams.Versions checks.
func (f *Fanout) inserts(events []*herald.Event, now time.Time, tier0Delay time.Duration) ([]store.EventInsert, [][]*compiledSub, *store.SubscriptionsVersions) {
	f.mu.RLock()
	subs := f.subs
	var version *store.SubscriptionsVersions
	if f.loaded {
		v := f.version // installed with subs, under mu
		version = &v
	}
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
	return out, targets, version
}
