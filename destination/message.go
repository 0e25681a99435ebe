package destination

import (
	"strconv"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/webhook"
)

// Header names a broker message carries, under their webhook names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	HeaderEventType = "herald-event-type"
	HeaderTenant    = "herald-tenant"
	HeaderAttempt   = "herald-attempt"
	// ContentType is the body's media type (AMQP content-type, MQTT 5
	// content type).
	ContentType = "application/json"
)

// Message is what a broker destination publishes for one attempt: the
// webhook body, signed as a webhook is.
type Message struct {
	// ID is the webhook-id: the delivery id, the same on every attempt, so
	// consumers (and brokers with a dedupe window, NATS) drop repeats.
	ID string
	// Headers holds webhook-id, webhook-timestamp, webhook-signature,
	// herald-event-type, herald-attempt and, for a tenanted event,
	// herald-tenant.
	Headers map[string]string
	Body    []byte
}

// NewMessage signs r's body as a webhook with r's secrets. It fails, with the
// Result to record, when the request cannot be signed (no secret, a bad
// one, no message id): herald never publishes an unsigned message.
func NewMessage(r *webhook.Request) (*Message, *webhook.Result) {
	if r.MsgID == "" {
		return nil, &webhook.Result{Class: herald.ErrorInvalidRequest, Message: "no message id"}
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	sig, err := webhook.SignatureHeader(r.Secrets, r.MsgID, ts, r.Body)
	if err != nil {
		return nil, &webhook.Result{Class: herald.ErrorInvalidRequest, Message: herald.CleanLine(err.Error(), 256)}
	}
	h := map[string]string{
		HeaderID:        r.MsgID,
		HeaderTimestamp: strconv.FormatInt(ts.Unix(), 10),
		HeaderSignature: sig,
		HeaderEventType: r.EventType,
		HeaderAttempt:   strconv.Itoa(r.Attempt),
	}
	if r.Tenant != "" {
		h[HeaderTenant] = r.Tenant
	}
	return &Message{ID: r.MsgID, Headers: h, Body: r.Body}, nil
}

// RecordedHeaders are the message headers as the attempt records them
// (herald.BoundHeaders: the signature's value redacted). Every broker
// publisher records them, whatever the outcome: they are what was sent, or
// would have been.
func (m *Message) RecordedHeaders() map[string]string { return herald.BoundHeaders(m.Headers) }

// Timeout is the attempt's timeout: r.Timeout (the subscription's
// timeout_ms), herald.DefaultTimeout when unset, at most herald.MaxTimeout.
func Timeout(r *webhook.Request) time.Duration {
	if r.Timeout <= 0 {
		return herald.DefaultTimeout
	}
	return min(r.Timeout, herald.MaxTimeout)
}
