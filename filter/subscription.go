package filter

import "github.com/heraldhq/herald"

// Delivers reports whether ev goes to sub: the fan-out's rule, which the
// ingester applies to new events and replay to stored ones, so both agree.
// A system event (herald.*) goes only to a subscription with a pattern
// naming herald.* (wantSystem: sub.WantsSystemEvents(), which callers
// matching many events compute once); the event's tenant must be one sub
// receives (herald.Subscription.Receives); its type must match one of
// sub's patterns; and m, sub's compiled filter (nil: no filter), must
// match. *in is ev's filter input, built on first need and kept there, so
// one event matched against many subscriptions builds it once (start with
// a nil *Input per event).
func Delivers(sub *herald.Subscription, wantSystem bool, m Matcher, ev *herald.Event, in **Input) bool {
	if herald.IsSystemEventType(ev.Type) && !wantSystem {
		return false
	}
	if !sub.Receives(ev.Tenant) || !herald.MatchEventType(sub.EventTypes, ev.Type) {
		return false
	}
	if m == nil {
		return true
	}
	if *in == nil {
		*in = NewInput(ev)
	}
	return m.Match(*in)
}
