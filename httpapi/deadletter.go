package httpapi

import (
	"net/http"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Dead letters: GET /v1/dead-letters (groups) and POST /v1/dead-letters/redrive.

type deadLetterGroupJSON struct {
	SubscriptionID string            `json:"subscription_id"`
	Error          herald.ErrorClass `json:"error"`
	Count          int               `json:"count"`
	OldestAt       string            `json:"oldest_at"`
	NewestAt       string            `json:"newest_at"`
}

// deadLetterGroups answers GET /v1/dead-letters: counts by subscription and
// last error class.
func (s *server) deadLetterGroups(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	tenant, err := tenantFilter(r, q)
	if err != nil {
		return err
	}
	groups, err := s.store.DeadLetterGroupList(r.Context(), &store.DeadLetterGroupListParams{
		SubscriptionID: q.Get("subscription_id"), Tenant: tenant,
	})
	if err != nil {
		return err
	}
	out := struct {
		Groups []deadLetterGroupJSON `json:"groups"`
	}{Groups: make([]deadLetterGroupJSON, len(groups))}
	for i, g := range groups {
		out.Groups[i] = deadLetterGroupJSON{SubscriptionID: g.SubscriptionID, Error: g.Error, Count: g.Count,
			OldestAt: timestamp(g.OldestAt), NewestAt: timestamp(g.NewestAt)}
	}
	return s.reply(w, http.StatusOK, out)
}

// redriveJSON answers a redrive: Matched is how many dead letters matched
// when the call began, Remaining how many of them are still dead after it
// (so a client stepping with limit loops until it is 0).
type redriveJSON struct {
	Redriven  int `json:"redriven"`
	Matched   int `json:"matched"`
	Remaining int `json:"remaining"`
}

// maxRedriveLimit caps one step of a stepped redrive.
const maxRedriveLimit = 10000

// deadLetterRedrive puts a subscription's dead deliveries that died in
// [since, until) back in tier 0. since and until are optional RFC 3339
// times; an unknown subscription is 404 rather than "0 redriven", so a
// typo in the id is not mistaken for an empty dead-letter queue.
func (s *server) deadLetterRedrive(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.smallLimit(SmallBodyBytes))
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow("subscription_id", "since", "until", "error", "limit", "dry_run"); err != nil {
		return err
	}
	params := &store.DeadLetterRedriveParams{Now: s.now()}
	set, err := o.str("subscription_id", &params.SubscriptionID)
	if err != nil {
		return err
	}
	if !set || params.SubscriptionID == "" {
		return herald.FieldErrorf(herald.CodeMissingField, "subscription_id", "subscription_id is required")
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"since", &params.Since}, {"until", &params.Until}} {
		var v string
		set, err := o.str(f.name, &v)
		if err != nil {
			return err
		}
		if !set {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return invalid(f.name, "must be an RFC 3339 time such as 2025-01-02T15:04:05Z")
		}
		*f.dst = t.UTC()
	}
	if !params.Since.IsZero() && !params.Until.IsZero() && !params.Since.Before(params.Until) {
		return invalid("until", "must be after since")
	}
	var class string
	if _, err := o.str("error", &class); err != nil {
		return err
	}
	params.Error = herald.ErrorClass(class)
	var limit int64
	if _, err := o.integer("limit", &limit); err != nil {
		return err
	}
	if limit < 0 || limit > maxRedriveLimit {
		return invalid("limit", "must be from 1 to %d (0 or absent: all at once)", maxRedriveLimit)
	}
	params.Limit = int(limit)
	dryRun, err := o.boolean("dry_run")
	if err != nil {
		return err
	}
	if _, err := s.visibleSubscription(r, params.SubscriptionID); err != nil {
		return err
	}
	matched, err := s.store.DeadLetterCount(r.Context(), params)
	if err != nil {
		return err
	}
	if dryRun {
		return s.reply(w, http.StatusOK, redriveJSON{Matched: matched, Remaining: matched})
	}
	n, err := s.store.DeadLetterRedrive(r.Context(), params)
	if err != nil {
		return err
	}
	if n > 0 {
		s.notify()
	}
	// Deliveries that died during the call may make n exceed the count.
	return s.reply(w, http.StatusAccepted, redriveJSON{Redriven: n, Matched: max(matched, n), Remaining: max(matched-n, 0)})
}
