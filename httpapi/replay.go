package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
	"github.com/heraldhq/herald/store"
)

// Resend and replay: POST /v1/events/{id}/resend and POST
// /v1/subscriptions/{id}/replay make NEW deliveries of stored events (a
// retry or a redrive puts an existing delivery back instead). Each call
// makes its own: resending or replaying twice sends twice. New deliveries
// take new publish positions, so a fifo or latest subscription orders them
// after what it already has, by its per-key rules (store/ordering.go): a
// latest subscription skips a replayed version no newer than the one it
// last delivered, and of several replayed versions of a key sends the
// newest only.

// Replay limits.
const (
	// maxReplayWindow bounds [since, until) of one replay.
	maxReplayWindow = 31 * 24 * time.Hour
	// maxReplayEvents is the most events one replay matches (and delivers);
	// more answer truncated with a cursor to continue from.
	maxReplayEvents = 10000
	// maxReplayScan is the most stored events one replay examines, so a
	// filter that matches few events in a busy window still answers in
	// bounded time (truncated, with a cursor, like maxReplayEvents).
	maxReplayScan = 100000
	// replayPage is how many events replay reads per store call.
	replayPage = 1000
)

// tier0Delay is when a new delivery's tier 0 matures after now.
func (s *server) tier0Delay() time.Duration {
	if len(s.cfg.Tiers) > 0 {
		return s.cfg.Tiers[0]
	}
	return 0
}

// eventResend answers POST /v1/events/{id}/resend {"subscription_id"}: a
// new delivery of the event to that subscription, whether or not it
// received the event before, and whatever its event types and filter say
// (the caller chose it). The event is found as GET /v1/events/{id} finds
// it (?tenant= when ids repeat across tenants); the subscription must be
// enabled and receive the event's tenant (herald.Subscription.Receives).
func (s *server) eventResend(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(w, r, s.smallLimit(SmallBodyBytes))
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow("subscription_id"); err != nil {
		return err
	}
	var subID string
	if set, err := o.str("subscription_id", &subID); err != nil {
		return err
	} else if !set || subID == "" {
		return herald.FieldErrorf(herald.CodeMissingField, "subscription_id", "subscription_id is required")
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	t, err := tenantFilter(r, q)
	if err != nil {
		return err
	}
	res, err := s.store.EventGet(r.Context(), &store.EventGetParams{ID: id, Tenant: t,
		AnyTenant: principalOf(r).Tenant == "" && !q.Has("tenant")})
	if err != nil {
		return notFound(err, "event", id)
	}
	ev := res.Event
	sub, err := s.visibleSubscription(r, subID)
	if err != nil {
		return err
	}
	if !sub.Receives(ev.Tenant) {
		return invalid("subscription_id", "names subscription %s, which does not receive events of %s",
			quote(sub.ID), eventTenantName(ev.Tenant))
	}
	if sub.State != herald.SubscriptionEnabled {
		return herald.Conflictf("subscription %s is %s; enable it before resending to it", quote(sub.ID), sub.State)
	}
	now := s.now()
	dlv := herald.NewID(herald.PrefixDelivery)
	n, err := s.store.DeliveryCreateMany(r.Context(), &store.DeliveryCreateManyParams{
		SubscriptionID: sub.ID, Now: now,
		Deliveries: []store.DeliveryCreate{{ID: dlv, Event: store.EventKeyOf(ev), NextAttemptAt: now.Add(s.tier0Delay())}},
	})
	if err != nil {
		return err
	}
	if n == 0 {
		// Deleted between the reads and the insert (the subscription, or
		// the event by retention).
		return herald.NotFoundf("event %s or subscription %s no longer exists", quote(id), quote(subID))
	}
	s.notify()
	return s.reply(w, http.StatusAccepted, resendJSON{DeliveryID: dlv, EventID: ev.ID, SubscriptionID: sub.ID})
}

// resendJSON answers a resend.
type resendJSON struct {
	DeliveryID     string `json:"delivery_id"`
	EventID        string `json:"event_id"`
	SubscriptionID string `json:"subscription_id"`
}

// eventTenantName names an event's tenant in a message.
func eventTenantName(t string) string {
	if t == "" {
		return "no tenant"
	}
	return "tenant " + quote(t)
}

// replayJSON answers a replay: Matched events matched (a dry run stops
// there), Replayed new deliveries were stored (fewer than Matched only if
// the subscription was deleted meanwhile or retention took events).
// Truncated says the call stopped before until (maxReplayEvents matched
// or maxReplayScan examined): call again with the same body plus
// "cursor": next_cursor to go on.
type replayJSON struct {
	Matched    int     `json:"matched"`
	Replayed   int     `json:"replayed"`
	DryRun     bool    `json:"dry_run"`
	Truncated  bool    `json:"truncated"`
	NextCursor *string `json:"next_cursor"`
}

// subscriptionReplay answers POST /v1/subscriptions/{id}/replay {"since",
// "until", "event_types", "dry_run", "cursor"}: one new delivery for every
// stored event in [since, until) the subscription would receive if it
// were published now — the fan-out's rule (filter.Delivers: tenant, event
// types, filter, system events), narrowed by event_types when given.
// Events published before the subscription was created are never
// replayed: they were not its events, and a receiver set up later should
// not get history it never asked for by widening a window. Events go
// oldest first, in publish order.
func (s *server) subscriptionReplay(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(w, r, s.smallLimit(SmallBodyBytes))
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow("since", "until", "event_types", "dry_run", "cursor"); err != nil {
		return err
	}
	var since, until time.Time
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"since", &since}, {"until", &until}} {
		var v string
		set, err := o.str(f.name, &v)
		if err != nil {
			return err
		}
		if !set || v == "" {
			return herald.FieldErrorf(herald.CodeMissingField, f.name, "%s is required (an RFC 3339 time)", f.name)
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return invalid(f.name, "must be an RFC 3339 time such as 2025-01-02T15:04:05Z")
		}
		*f.dst = t.UTC()
	}
	if !since.Before(until) {
		return invalid("until", "must be after since")
	}
	if until.Sub(since) > maxReplayWindow {
		return invalid("until", "must be at most 31 days after since (got %s); replay a longer range in several calls",
			until.Sub(since).Round(time.Second))
	}
	types, _, err := o.stringList("event_types")
	if err != nil {
		return err
	}
	if len(types) > maxEventTypes {
		return invalid("event_types", "may hold at most %d patterns, got %d", maxEventTypes, len(types))
	}
	for i, p := range types {
		if err := herald.CheckEventTypePattern(p); err != nil {
			return invalid(fmt.Sprintf("event_types[%d]", i), "%s", err)
		}
	}
	dryRun, err := o.boolean("dry_run")
	if err != nil {
		return err
	}
	var after *store.EventCursor
	var c string
	if _, err := o.str("cursor", &c); err != nil {
		return err
	}
	if c != "" {
		cur, ok := decodeEventCursor(c)
		if !ok {
			return herald.FieldErrorf(herald.CodeInvalidCursor, "cursor",
				"cursor is not one this API returned; pass next_cursor from the previous replay unchanged")
		}
		after = cur
	}
	sub, err := s.visibleSubscription(r, id)
	if err != nil {
		return err
	}
	if !dryRun && sub.State != herald.SubscriptionEnabled {
		return herald.Conflictf("subscription %s is %s; enable it before replaying to it (a dry run counts anyway)",
			quote(sub.ID), sub.State)
	}
	m, err := filter.Compile(sub.Filter)
	if err != nil {
		return err
	}
	matched, out, err := s.replayMatch(r, sub, m, types, since, until, after)
	if err != nil {
		return err
	}
	out.DryRun = dryRun
	out.Matched = len(matched)
	if dryRun || len(matched) == 0 {
		return s.reply(w, http.StatusOK, out)
	}
	now := s.now()
	next := now.Add(s.tier0Delay())
	ds := make([]store.DeliveryCreate, len(matched))
	for i, k := range matched {
		ds[i] = store.DeliveryCreate{ID: herald.NewID(herald.PrefixDelivery), Event: k, NextAttemptAt: next}
	}
	out.Replayed, err = s.store.DeliveryCreateMany(r.Context(), &store.DeliveryCreateManyParams{
		SubscriptionID: sub.ID, Deliveries: ds, Now: now,
	})
	if err != nil {
		return err
	}
	if out.Replayed > 0 {
		s.notify()
	}
	return s.reply(w, http.StatusAccepted, out)
}

// replayMatch walks the stored events of [since, until) after after,
// oldest first, and returns those sub receives (and types, when given,
// match), with the truncation fields of the answer set.
func (s *server) replayMatch(r *http.Request, sub *herald.Subscription, m filter.Matcher, types []string,
	since, until time.Time, after *store.EventCursor) ([]store.EventKey, replayJSON, error) {
	var out replayJSON
	params := &store.EventListParams{Oldest: true, Since: since, Until: until, After: after, Limit: replayPage,
		Tenant: sub.Tenant, ExcludeSystem: !sub.WantsSystemEvents()}
	if created := sub.CreatedAt.UTC().Truncate(time.Millisecond); params.Since.Before(created) {
		params.Since = created
	}
	if len(types) == 1 {
		params.Type = types[0]
	}
	wantSystem := sub.WantsSystemEvents()
	var matched []store.EventKey
	scanned := 0
	for params.Since.Before(params.Until) {
		res, err := s.store.EventList(r.Context(), params)
		if err != nil {
			return nil, out, err
		}
		for i, ev := range res.Events {
			scanned++
			var in *filter.Input
			if (len(types) == 0 || herald.MatchEventType(types, ev.Type)) && filter.Delivers(sub, wantSystem, m, ev, &in) {
				matched = append(matched, store.EventKeyOf(ev))
			}
			if len(matched) == maxReplayEvents || scanned == maxReplayScan {
				if i < len(res.Events)-1 || res.More {
					out.Truncated = true
					c := encodeEventCursor(ev)
					out.NextCursor = &c
				}
				return matched, out, nil
			}
		}
		if !res.More || len(res.Events) == 0 {
			break
		}
		last := res.Events[len(res.Events)-1]
		params.After = &store.EventCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return matched, out, nil
}
