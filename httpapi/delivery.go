package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

type attemptJSON struct {
	N               int               `json:"n"`
	At              string            `json:"at"`
	Tier            int               `json:"tier"`
	DurationMS      int64             `json:"duration_ms"`
	Status          int               `json:"status"`
	Error           herald.ErrorClass `json:"error"`
	ErrorMessage    string            `json:"error_message"`
	ResponseExcerpt string            `json:"response_excerpt"`
	// Request is the request the attempt sent, rebuilt (see attemptRequest).
	Request *attemptRequestJSON `json:"request,omitempty"`
}

// deliveryJSON is a delivery as the API shows it. Attempts is present only
// on GET /v1/deliveries/{id}; list pages carry the last attempt's summary
// (last_status, last_error) instead.
type deliveryJSON struct {
	ID               string               `json:"id"`
	EventID          string               `json:"event_id"`
	SubscriptionID   string               `json:"subscription_id"`
	State            herald.DeliveryState `json:"state"`
	Tier             int                  `json:"tier"`
	AttemptCount     int                  `json:"attempt_count"`
	Attempts         *[]attemptJSON       `json:"attempts,omitempty"`
	NextAttemptAt    *string              `json:"next_attempt_at"`
	EventKey         string               `json:"event_key,omitempty"`
	EventVersion     *int64               `json:"event_version,omitempty"`
	LastStatus       int                  `json:"last_status"`
	LastError        herald.ErrorClass    `json:"last_error"`
	LastErrorMessage string               `json:"last_error_message"`
	CreatedAt        string               `json:"created_at"`
	UpdatedAt        string               `json:"updated_at"`
}

// deliveryView renders d. next_attempt_at is null unless the delivery is
// pending: a finished delivery has no next attempt whatever the row holds.
func deliveryView(d *herald.Delivery) deliveryJSON {
	v := deliveryJSON{
		ID: d.ID, EventID: d.EventID, SubscriptionID: d.SubscriptionID, State: d.State, Tier: d.Tier,
		AttemptCount: d.AttemptCount, EventKey: d.EventKey, EventVersion: d.EventVersion,
		LastStatus: d.LastStatus, LastError: d.LastError, LastErrorMessage: d.LastMessage,
		CreatedAt: timestamp(d.CreatedAt), UpdatedAt: timestamp(d.UpdatedAt),
	}
	if d.State == herald.DeliveryPending && d.NextAttemptAt != nil {
		t := timestamp(*d.NextAttemptAt)
		v.NextAttemptAt = &t
	}
	return v
}

func (s *server) deliveryList(w http.ResponseWriter, r *http.Request) error {
	p, err := pageParams(r, herald.PrefixDelivery)
	if err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	tenant, err := tenantFilter(r, q)
	if err != nil {
		return err
	}
	params := &store.DeliveryListParams{
		Tenant:         tenant,
		SubscriptionID: q.Get("subscription_id"),
		EventID:        q.Get("event_id"),
		State:          herald.DeliveryState(q.Get("state")),
		Limit:          p.limit,
		Before:         p.key,
	}
	if params.Since, params.Until, err = timeWindow(q); err != nil {
		return err
	}
	if params.State != "" && !params.State.Valid() {
		return herald.FieldErrorf(herald.CodeInvalidField, "state",
			"state must be one of pending, in_flight, delivered, dead, skipped, superseded, cancelled")
	}
	res, err := s.store.DeliveryList(r.Context(), params)
	if err != nil {
		return err
	}
	out := listJSON[deliveryJSON]{Data: make([]deliveryJSON, len(res.Deliveries))}
	for i, d := range res.Deliveries {
		out.Data[i] = deliveryView(d)
	}
	if n := len(res.Deliveries); n > 0 {
		out.NextCursor = nextCursor(res.More, res.Deliveries[n-1].ID)
	}
	return s.reply(w, http.StatusOK, out)
}

func (s *server) deliveryGet(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	res, err := s.store.DeliveryGet(r.Context(), id)
	if err != nil {
		return notFound(err, "delivery", id)
	}
	v := deliveryView(res.Delivery)
	// The requests are rebuilt from the subscription and the event type;
	// a deleted subscription or a swept event leaves them out.
	sub, _ := s.store.SubscriptionGet(r.Context(), res.Delivery.SubscriptionID)
	if own := principalOf(r).Tenant; own != "" && (sub == nil || sub.Tenant != own) {
		return notFound(herald.ErrNotFound, "delivery", id)
	}
	sub = receiverAsSeenBy(r, sub)
	var eventType string
	if len(res.Attempts) > 0 && sub != nil {
		if ev, err := s.store.EventGet(r.Context(), &store.EventGetParams{
			ID: res.Delivery.EventID, Tenant: res.Delivery.EventTenant,
		}); err == nil {
			eventType = ev.Event.Type
		}
	}
	attempts := make([]attemptJSON, len(res.Attempts))
	for i, a := range res.Attempts {
		attempts[i] = attemptJSON{
			N: a.N, At: timestamp(a.At), Tier: a.Tier, DurationMS: a.DurationMS, Status: a.Status,
			Error: a.Error, ErrorMessage: a.ErrorMessage, ResponseExcerpt: a.ResponseExcerpt,
		}
		if sub != nil {
			attempts[i].Request = attemptRequest(sub, res.Delivery, eventType, &res.Attempts[i], s.cfg.UserAgent)
		}
	}
	v.Attempts = &attempts
	out := deliveryDetailJSON{deliveryJSON: v}
	if res.Delivery.State == herald.DeliveryPending {
		why, err := s.store.DeliveryWaitingFor(r.Context(), &store.DeliveryWaitingForParams{ID: id, Now: s.now()})
		if err != nil {
			return notFound(err, "delivery", id)
		}
		if why != store.WaitingForNothing {
			str := string(why)
			out.WaitingFor = &str
		}
	}
	return s.reply(w, http.StatusOK, out)
}

// deliveryDetailJSON is GET /v1/deliveries/{id}: the delivery with why it
// is not being sent yet — "key" (per-key ordering: an earlier delivery of
// its key, the key held, or the key interval), "maturity" (its tier's
// delay), or null.
type deliveryDetailJSON struct {
	deliveryJSON
	WaitingFor *string `json:"waiting_for"`
}

// deliveryRetry puts one finished delivery back in tier 0, due now. A
// pending or in-flight delivery is a conflict: it will be tried anyway.
func (s *server) deliveryRetry(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.confineDelivery(r, id); err != nil {
		return err
	}
	d, err := s.store.DeliveryRetry(r.Context(), &store.DeliveryRetryParams{ID: id, Now: s.now()})
	if err != nil {
		if isBareSentinel(err, herald.ErrConflict) {
			return herald.Conflictf("delivery %s cannot be retried: it is pending or in flight, or its subscription was deleted", quote(id))
		}
		return notFound(err, "delivery", id)
	}
	s.notify()
	return s.reply(w, http.StatusAccepted, deliveryView(d))
}

// isBareSentinel reports whether err carries sentinel's code with no
// message of its own, so a handler can say something more useful.
func isBareSentinel(err error, sentinel *herald.Error) bool {
	var he *herald.Error
	return errors.As(err, &he) && he.Code == sentinel.Code && he.Message == sentinel.Message
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
