package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// This file serves the routes behind the operator surface (dashboard and
// CLI): event search, dead-letter groups, filter tests, test events,
// per-subscription stats and this node's recent history.

// TestEventType is the type of the events POST /v1/subscriptions/{id}/test
// sends: in herald's reserved namespace, so no producer event is mistaken
// for one.
const TestEventType = "herald.test"

// defaultStatsWindow is the window of GET /v1/stats/subscriptions without
// ?since=.
const defaultStatsWindow = 24 * time.Hour

// timeParam reads an optional RFC 3339 query parameter.
func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalid(name, "must be an RFC 3339 time such as 2025-01-02T15:04:05Z")
	}
	return t.UTC(), nil
}

// timeWindow reads ?since= and ?until=; until must be after since.
func timeWindow(q url.Values) (since, until time.Time, err error) {
	if since, err = timeParam(q, "since"); err != nil {
		return
	}
	if until, err = timeParam(q, "until"); err != nil {
		return
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		err = invalid("until", "must be after since")
	}
	return
}

type eventListItemJSON struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Key       string          `json:"key,omitempty"`
	Version   *int64          `json:"version,omitempty"`
	Tenant    string          `json:"tenant,omitempty"`
	Data      json.RawMessage `json:"data"`
	Timestamp string          `json:"timestamp"`
}

// eventList answers GET /v1/events: newest first, filtered by exact type
// and key and a time window. The cursor holds (created_at, id) because
// producers may choose event ids.
func (s *server) eventList(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	limit, err := limitParam(q)
	if err != nil {
		return err
	}
	params := &store.EventListParams{Type: q.Get("type"), Key: q.Get("key"), Limit: limit}
	if params.Tenant, err = tenantFilter(r, q); err != nil {
		return err
	}
	if params.Since, params.Until, err = timeWindow(q); err != nil {
		return err
	}
	if c := q.Get("cursor"); c != "" {
		cur, ok := decodeEventCursor(c)
		if !ok {
			return herald.FieldErrorf(herald.CodeInvalidCursor, "cursor",
				"cursor is not one this API returned; pass next_cursor from the previous page unchanged")
		}
		params.After = cur
	}
	res, err := s.store.EventList(r.Context(), params)
	if err != nil {
		return err
	}
	out := listJSON[eventListItemJSON]{Data: make([]eventListItemJSON, len(res.Events))}
	for i, ev := range res.Events {
		data := ev.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		out.Data[i] = eventListItemJSON{ID: ev.ID, Type: ev.Type, Key: ev.Key, Version: ev.Version, Tenant: ev.Tenant,
			Data: data, Timestamp: timestamp(ev.CreatedAt)}
	}
	if n := len(res.Events); n > 0 && res.More {
		c := encodeEventCursor(res.Events[n-1])
		out.NextCursor = &c
	}
	return s.reply(w, http.StatusOK, out)
}

func encodeEventCursor(ev *herald.Event) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(ev.CreatedAt.UnixMilli(), 10) + ":" + ev.ID))
}

func decodeEventCursor(c string) (*store.EventCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, false
	}
	msStr, id, ok := strings.Cut(string(b), ":")
	if !ok || id == "" || len(id) > maxCursorID {
		return nil, false
	}
	ms, err := strconv.ParseInt(msStr, 10, 64)
	if err != nil {
		return nil, false
	}
	return &store.EventCursor{CreatedAt: time.UnixMilli(ms).UTC(), ID: id}, true
}

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

// filterTest answers POST /v1/filters/test: would a subscription with
// these event types and this filter receive this event? It compiles and
// evaluates exactly as fan-out does, cost budget included.
func (s *server) filterTest(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	o, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := o.allow("filter", "event_types", "event"); err != nil {
		return err
	}
	var sub herald.Subscription
	if err := decodeEventTypes(o, &sub); err != nil {
		return err
	}
	if err := decodeFilter(o, &sub); err != nil {
		return err
	}
	raw, ok := o.get("event")
	if !ok {
		return herald.FieldErrorf(herald.CodeMissingField, "event", "event is required")
	}
	eo, err := parseObject(raw, "event")
	if err != nil {
		return err
	}
	if err := eo.allow("id", "type", "key", "version", "data", "timestamp", "tenant"); err != nil {
		return err
	}
	ev := &herald.Event{Data: json.RawMessage("null"), CreatedAt: s.now()}
	if set, err := eo.str("type", &ev.Type); err != nil {
		return err
	} else if !set || ev.Type == "" {
		return herald.FieldErrorf(herald.CodeMissingField, "event.type", "event.type is required")
	}
	if _, err := eo.str("id", &ev.ID); err != nil {
		return err
	}
	if _, err := eo.str("key", &ev.Key); err != nil {
		return err
	}
	// Filters see the tenant as event.tenant (CEL) or tenant (JMESPath).
	if _, err := eo.str("tenant", &ev.Tenant); err != nil {
		return err
	}
	var version int64
	if set, err := eo.integer("version", &version); err != nil {
		return err
	} else if set {
		ev.Version = &version
	}
	if d, ok := eo.get("data"); ok {
		ev.Data = d
	}
	typeMatched := herald.MatchEventType(sub.EventTypes, ev.Type) &&
		(!herald.IsSystemEventType(ev.Type) || sub.WantsSystemEvents())
	m, err := filter.Compile(sub.Filter)
	if err != nil {
		return &herald.Error{Code: herald.CodeInvalidFilter, Field: "filter", Message: err.Error(), Err: err}
	}
	filterMatched := m.Match(filter.NewInput(ev))
	return s.reply(w, http.StatusOK, struct {
		Matched       bool `json:"matched"`
		TypeMatched   bool `json:"type_matched"`
		FilterMatched bool `json:"filter_matched"`
	}{typeMatched && filterMatched, typeMatched, filterMatched})
}

// subscriptionTest answers POST /v1/subscriptions/{id}/test: an event of
// type herald.test stored with one delivery, to this subscription only,
// whatever its event types and filter. It goes through the queue like any
// delivery (tier 0's delay, throttles, a disabled subscription waits).
func (s *server) subscriptionTest(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	data := json.RawMessage(nil)
	if len(strings.TrimSpace(string(body))) > 0 {
		o, err := parseBody(body)
		if err != nil {
			return err
		}
		if err := o.allow("data"); err != nil {
			return err
		}
		data, _ = o.get("data")
	}
	sub, err := s.visibleSubscription(r, id)
	if err != nil {
		return err
	}
	now := s.now()
	if data == nil {
		data, _ = json.Marshal(map[string]any{
			"message": "test event sent from herald", "subscription_id": sub.ID, "sent_at": timestamp(now),
		})
	}
	ev := &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: TestEventType, Data: data, CreatedAt: now, Tenant: sub.Tenant}
	dlv := herald.NewID(herald.PrefixDelivery)
	var tier0 time.Duration
	if len(s.cfg.Tiers) > 0 {
		tier0 = s.cfg.Tiers[0]
	}
	res, err := s.store.EventInsertMany(r.Context(), &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{{
		Event:      ev,
		Deliveries: []store.DeliveryInsert{{ID: dlv, SubscriptionID: sub.ID, NextAttemptAt: now.Add(tier0)}},
	}}})
	if err != nil {
		return err
	}
	if len(res) != 1 || res[0].DeliveryCount != 1 {
		// The subscription was deleted between the read and the insert.
		return herald.NotFoundf("subscription %s not found", quote(id))
	}
	s.notify()
	return s.reply(w, http.StatusAccepted, struct {
		EventID    string `json:"event_id"`
		DeliveryID string `json:"delivery_id"`
	}{ev.ID, dlv})
}

type subscriptionStatsJSON struct {
	SubscriptionID string   `json:"subscription_id"`
	Delivered      int      `json:"delivered"`
	Dead           int      `json:"dead"`
	Pending        int      `json:"pending"`
	InFlight       int      `json:"in_flight"`
	SuccessRate    *float64 `json:"success_rate"`
}

// subscriptionStats answers GET /v1/stats/subscriptions.
func (s *server) subscriptionStats(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	since, err := timeParam(q, "since")
	if err != nil {
		return err
	}
	if since.IsZero() {
		since = s.now().Add(-defaultStatsWindow)
	}
	tenant, err := tenantFilter(r, q)
	if err != nil {
		return err
	}
	stats, err := s.store.SubscriptionStatsList(r.Context(), &store.SubscriptionStatsListParams{Since: since, Tenant: tenant})
	if err != nil {
		return err
	}
	out := struct {
		Since string                  `json:"since"`
		Data  []subscriptionStatsJSON `json:"data"`
	}{Since: timestamp(since), Data: make([]subscriptionStatsJSON, len(stats))}
	for i, st := range stats {
		v := subscriptionStatsJSON{SubscriptionID: st.SubscriptionID, Delivered: st.Delivered, Dead: st.Dead,
			Pending: st.Pending, InFlight: st.InFlight}
		if n := st.Delivered + st.Dead; n > 0 {
			rate := float64(st.Delivered) / float64(n)
			v.SuccessRate = &rate
		}
		out.Data[i] = v
	}
	return s.reply(w, http.StatusOK, out)
}

// History is this node's recent publish and delivery counts, for the
// dashboard's charts; cmd/herald adapts metrics.History to it.
type History interface {
	// Interval is the length of one point.
	Interval() time.Duration
	// Points returns the points, oldest first.
	Points() []HistoryPoint
}

// HistoryPoint is one interval of History (fields as metrics.HistoryPoint).
type HistoryPoint struct {
	// At is the start of the interval.
	At                                 time.Time
	Published, Delivered, Failed, Dead int
	// LatencyP50 and LatencyP99 estimate publish→delivery latency of the
	// deliveries that succeeded in the interval; nil when none did.
	LatencyP50, LatencyP99 *time.Duration
}

// noHistoryInterval is the interval_s a node without a History answers:
// the dashboard's own default (ui/static/overview.js).
const noHistoryInterval = 10 * time.Second

type historyPointJSON struct {
	At           string   `json:"at"`
	Published    int      `json:"published"`
	Delivered    int      `json:"delivered"`
	Failed       int      `json:"failed"`
	Dead         int      `json:"dead"`
	LatencyP50MS *float64 `json:"latency_p50_ms"`
	LatencyP99MS *float64 `json:"latency_p99_ms"`
}

// statsHistory answers GET /v1/stats/history: this node's last hour. A node
// built without a history answers an empty list.
func (s *server) statsHistory(w http.ResponseWriter, _ *http.Request) error {
	out := struct {
		IntervalS int                `json:"interval_s"`
		Points    []historyPointJSON `json:"points"`
	}{IntervalS: int(noHistoryInterval / time.Second), Points: []historyPointJSON{}}
	if s.cfg.History != nil {
		out.IntervalS = int(s.cfg.History.Interval() / time.Second)
		msPtr := func(d *time.Duration) *float64 {
			if d == nil {
				return nil
			}
			v := float64(*d) / float64(time.Millisecond)
			return &v
		}
		for _, p := range s.cfg.History.Points() {
			out.Points = append(out.Points, historyPointJSON{At: timestamp(p.At), Published: p.Published,
				Delivered: p.Delivered, Failed: p.Failed, Dead: p.Dead,
				LatencyP50MS: msPtr(p.LatencyP50), LatencyP99MS: msPtr(p.LatencyP99)})
		}
	}
	return s.reply(w, http.StatusOK, out)
}

type attemptRequestJSON struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// maskedSignature stands in for webhook-signature in an attempt's request:
// the value would let a reader forge nothing, but it is derived from the
// secret and the API never shows what a secret signs.
const maskedSignature = "v1,****"

// attemptRequest rebuilds the request an attempt sent, from the
// subscription as it is now (herald does not store request headers per
// attempt: that would double the write per delivery).
func attemptRequest(sub *herald.Subscription, d *herald.Delivery, eventType string, a *herald.Attempt, userAgent string) *attemptRequestJSON {
	h := make(map[string]string, len(sub.Headers)+8)
	for name, v := range sub.Headers {
		if !webhook.ReservedHeader(name) {
			h[strings.ToLower(name)] = v
		}
	}
	h["content-type"] = "application/json"
	if _, ok := h["user-agent"]; !ok && userAgent != "" {
		h["user-agent"] = userAgent
	}
	h[webhook.HeaderID] = d.ID
	h[webhook.HeaderTimestamp] = strconv.FormatInt(a.At.Unix(), 10)
	h[webhook.HeaderSignature] = maskedSignature
	h["herald-attempt"] = strconv.Itoa(max(a.N, 1))
	if eventType != "" {
		h["herald-event-type"] = eventType
	}
	h["herald-subscription-id"] = sub.ID
	method := strings.ToUpper(sub.Method)
	if method == "" {
		method = http.MethodPost
	}
	return &attemptRequestJSON{Method: method, URL: sub.URL, Headers: h}
}
