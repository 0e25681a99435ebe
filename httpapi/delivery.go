package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// Deliveries: GET /v1/deliveries, GET /v1/deliveries/{id} (with the headers
// each attempt sent and received) and POST /v1/deliveries/{id}/retry.

type attemptJSON struct {
	N               int               `json:"n"`
	At              string            `json:"at"`
	Tier            int               `json:"tier"`
	DurationMS      int64             `json:"duration_ms"`
	Status          int               `json:"status"`
	Error           herald.ErrorClass `json:"error"`
	ErrorMessage    string            `json:"error_message"`
	ResponseExcerpt string            `json:"response_excerpt"`
	// RequestHeaders and ResponseHeaders are the headers the attempt sent
	// and received, as stored (herald.BoundHeaders: bounded, credentials
	// redacted); null when not recorded (before migration 018; no answer).
	RequestHeaders  map[string]string `json:"request_headers"`
	ResponseHeaders map[string]string `json:"response_headers"`
	// Request is a webhook attempt's request rebuilt from the subscription
	// as it is now (see attemptRequest), only for an attempt stored before
	// herald kept request headers; Rebuilt says so.
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
	// Old attempts' requests are rebuilt from the subscription and the
	// event type; a deleted subscription or a swept event leaves them out.
	sub, _ := s.store.SubscriptionGet(r.Context(), res.Delivery.SubscriptionID)
	if own := principalOf(r).Tenant; own != "" && (sub == nil || sub.Tenant != own) {
		return notFound(herald.ErrNotFound, "delivery", id)
	}
	sub = receiverAsSeenBy(r, sub)
	// The event's type is shown (event_type) and signs the rebuilt
	// requests; a swept event leaves both out.
	var eventType string
	if ev, err := s.store.EventGet(r.Context(), &store.EventGetParams{
		ID: res.Delivery.EventID, Tenant: res.Delivery.EventTenant,
	}); err == nil {
		eventType = ev.Event.Type
	}
	attempts := make([]attemptJSON, len(res.Attempts))
	for i, a := range res.Attempts {
		attempts[i] = attemptJSON{
			N: a.N, At: timestamp(a.At), Tier: a.Tier, DurationMS: a.DurationMS, Status: a.Status,
			Error: a.Error, ErrorMessage: a.ErrorMessage, ResponseExcerpt: a.ResponseExcerpt,
			RequestHeaders: a.RequestHeaders, ResponseHeaders: a.ResponseHeaders,
		}
		// An attempt stored before migration 018 has no headers: its
		// request is rebuilt, labelled so. Only a webhook's attempt is an
		// HTTP request to rebuild; other destination types show none.
		if a.RequestHeaders == nil && sub != nil && sub.Dest().Type == herald.DestinationWebhook {
			attempts[i].Request = attemptRequest(sub, res.Delivery, eventType, &res.Attempts[i], s.cfg.UserAgent)
		}
	}
	v.Attempts = &attempts
	out := deliveryDetailJSON{deliveryJSON: v, EventType: eventType}
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
	// EventType is the event's type; absent once the event was swept.
	EventType  string  `json:"event_type,omitempty"`
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

type attemptRequestJSON struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	// Rebuilt is always true: the request is herald's reconstruction from
	// the subscription as it is now, not a record of what was sent.
	Rebuilt bool `json:"rebuilt"`
}

// maskedSignature stands in for webhook-signature in a rebuilt request, as
// it does in a stored one: the value is derived from the secret and the
// API never shows what a secret signs.
var maskedSignature = herald.RedactHeader(webhook.HeaderSignature, "v1,x")

// attemptRequest rebuilds the request of an attempt stored before
// migration 018 (which record the headers sent), from the subscription as
// it is now.
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
	return &attemptRequestJSON{Method: method, URL: sub.URL, Headers: h, Rebuilt: true}
}
