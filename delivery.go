package herald

import "time"

// DeliveryState is where a delivery is in its life.
type DeliveryState string

const (
	DeliveryPending    DeliveryState = "pending"   // waiting in a tier
	DeliveryInFlight   DeliveryState = "in_flight" // claimed under a lease
	DeliveryDelivered  DeliveryState = "delivered"
	DeliveryDead       DeliveryState = "dead" // failed in every tier
	DeliverySkipped    DeliveryState = "skipped"
	DeliverySuperseded DeliveryState = "superseded"
	DeliveryCancelled  DeliveryState = "cancelled"
)

// Valid reports whether s is a known state.
func (s DeliveryState) Valid() bool {
	switch s {
	case DeliveryPending, DeliveryInFlight, DeliveryDelivered, DeliveryDead,
		DeliverySkipped, DeliverySuperseded, DeliveryCancelled:
		return true
	}
	return false
}

// Finished reports whether the delivery will not be attempted again unless
// retried by hand.
func (s DeliveryState) Finished() bool {
	switch s {
	case DeliveryPending, DeliveryInFlight:
		return false
	}
	return true
}

// Delivery is one event for one subscription.
type Delivery struct {
	ID      string `json:"id"`
	EventID string `json:"event_id"`
	// EventTenant is the event's tenant ("" untenanted): an event ID is
	// unique only within its tenant, and an all-tenants subscription's
	// deliveries come from several.
	EventTenant    string        `json:"event_tenant,omitempty"`
	SubscriptionID string        `json:"subscription_id"`
	State          DeliveryState `json:"state"`
	// Tier is the retry tier the delivery waits in (or was last attempted
	// from); attempt n is made from tier n-1.
	Tier int `json:"tier"`
	// AttemptCount is the number of attempts made so far.
	AttemptCount  int        `json:"attempt_count"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	// EventKey and EventVersion are copied from the event so ordering can be
	// decided without a join.
	EventKey     string     `json:"event_key,omitempty"`
	EventVersion *int64     `json:"event_version,omitempty"`
	LastStatus   int        `json:"last_status,omitempty"`
	LastError    ErrorClass `json:"last_error,omitempty"`
	LastMessage  string     `json:"last_error_message,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// ErrorClass says why an attempt failed, in a stable word.
type ErrorClass string

const (
	ErrorNone                 ErrorClass = ""
	ErrorHTTPStatus           ErrorClass = "http_status"           // non-2xx answer (3xx included: redirects are not followed)
	ErrorTimeout              ErrorClass = "timeout"               // no complete answer within the timeout
	ErrorConnection           ErrorClass = "connection"            // refused, reset, closed early
	ErrorDNS                  ErrorClass = "dns"                   // name did not resolve
	ErrorTLS                  ErrorClass = "tls"                   // handshake or certificate failure
	ErrorDestinationForbidden ErrorClass = "destination_forbidden" // SSRF guard refused the address
	ErrorGone                 ErrorClass = "gone"                  // 410: the subscription was disabled
	ErrorInvalidRequest       ErrorClass = "invalid_request"       // the request could not be built
	ErrorSecretUnreadable     ErrorClass = "secret_unreadable"     // a signing secret did not decrypt: nothing was sent
	// Destination-specific classes (package destination and its types).
	ErrorPayloadTooLarge ErrorClass = "payload_too_large"      // the message exceeds what the destination takes (Web Push: 4 KiB record); dead at once
	ErrorRejected        ErrorClass = "rejected"               // the destination refused it for good (a push service's 400/401/403); dead at once
	ErrorUnroutable      ErrorClass = "unroutable"             // AMQP: returned as unroutable (mandatory); retried through the tiers
	ErrorNoStream        ErrorClass = "no_stream"              // NATS: no JetStream stream holds the subject; retried
	ErrorBroker          ErrorClass = "broker"                 // the broker refused or did not confirm (nack, channel error); retried
	ErrorConnectionUnset ErrorClass = "connection_unavailable" // the named connection is missing, of another type, or not granted to the tenant; retried
)

// Attempt is one HTTP request made for a delivery.
type Attempt struct {
	N               int        `json:"n"`
	At              time.Time  `json:"at"`
	DurationMS      int64      `json:"duration_ms"`
	Status          int        `json:"status"`
	Error           ErrorClass `json:"error,omitempty"`
	ErrorMessage    string     `json:"error_message,omitempty"`
	ResponseExcerpt string     `json:"response_excerpt,omitempty"`
	// Tier the attempt was made from.
	Tier int `json:"tier"`
	// RequestHeaders are the headers the attempt sent (a broker
	// destination's message headers), ResponseHeaders those the receiver
	// answered with, as BoundHeaders keeps them: bounded, credentials
	// redacted. nil means not recorded: an attempt stored before herald
	// kept them (migration 018), or no answer arrived (response).
	RequestHeaders  map[string]string `json:"request_headers,omitempty"`
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
}

// Limits on what an attempt keeps.
const (
	// ResponseExcerptLimit is how many bytes of a response body an attempt
	// keeps.
	ResponseExcerptLimit = 1024
	// ResponseReadLimit is how many bytes of a response herald reads before
	// closing the connection (so a huge or endless body cannot hold a worker).
	ResponseReadLimit = 64 << 10
)
