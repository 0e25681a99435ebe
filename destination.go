package herald

import (
	"slices"
	"time"
)

// DestinationType names where a subscription's deliveries go. Every type
// runs through the same engine (tiers, dead letters, ordering, throttling,
// alerts); only the last step, one attempt, differs (package destination).
type DestinationType string

const (
	// DestinationWebhook is a signed HTTP request (the default: a
	// subscription given only a url is a webhook).
	DestinationWebhook DestinationType = "webhook"
	// DestinationWebPush is an RFC 8291 encrypted, RFC 8292 (VAPID) signed
	// push message to a browser's push service.
	DestinationWebPush DestinationType = "webpush"
	// DestinationAMQP publishes to a RabbitMQ exchange, with confirms.
	DestinationAMQP DestinationType = "amqp"
	// DestinationNATS publishes to a NATS JetStream subject, awaiting the
	// PubAck.
	DestinationNATS DestinationType = "nats"
	// DestinationRedis appends to a Redis stream (XADD).
	DestinationRedis DestinationType = "redis"
	// DestinationMQTT publishes at QoS 1 over MQTT 5.
	DestinationMQTT DestinationType = "mqtt"
	// DestinationListen hands the webhook request to the `herald listen`
	// CLI connected to this subscription over a WebSocket; the CLI
	// forwards it to a local URL and reports the answer (ADR 0024).
	// Without a listener connected, attempts fail and retry through the
	// tiers.
	DestinationListen DestinationType = "listen"
)

// DestinationTypes lists every type, in the order the API documents them.
var DestinationTypes = []DestinationType{DestinationWebhook, DestinationWebPush,
	DestinationAMQP, DestinationNATS, DestinationRedis, DestinationMQTT, DestinationListen}

// Valid reports whether t is a known type.
func (t DestinationType) Valid() bool { return slices.Contains(DestinationTypes, t) }

// UsesConnection reports whether the type delivers through an
// operator-owned Connection (the brokers) rather than to a URL the
// subscription names.
func (t DestinationType) UsesConnection() bool {
	switch t {
	case DestinationAMQP, DestinationNATS, DestinationRedis, DestinationMQTT:
		return true
	}
	return false
}

// Destination says where a subscription's deliveries go. Type selects the
// fields that apply; the others are empty. For a webhook, URL and Method
// mirror Subscription.URL and Subscription.Method.
type Destination struct {
	Type DestinationType `json:"type"`

	// webhook
	URL    string `json:"url,omitempty"`
	Method string `json:"method,omitempty"`

	// webpush: the browser's PushSubscription, and the push message's
	// Urgency (RFC 8030: very-low, low, normal, high; default normal),
	// Topic (default: the event key, so "latest" ordering and the push
	// service's replacement of undelivered messages agree) and TTLS
	// (seconds the push service keeps an undelivered message; default
	// 86400).
	Subscription *PushSubscription `json:"subscription,omitempty"`
	Urgency      string            `json:"urgency,omitempty"`
	TTLS         *int              `json:"ttl_s,omitempty"`

	// brokers: the operator-owned Connection by name, and where on it.
	Connection string `json:"connection,omitempty"`
	// amqp: Exchange ("" is the default exchange) and RoutingKey (default:
	// the event type).
	Exchange   string `json:"exchange,omitempty"`
	RoutingKey string `json:"routing_key,omitempty"`
	// nats: Subject (default: derived from the event type).
	Subject string `json:"subject,omitempty"`
	// redis: Stream and MaxLen (approximate trimming; 0 = none).
	Stream string `json:"stream,omitempty"`
	MaxLen int64  `json:"maxlen,omitempty"`
	// mqtt: Topic (default: derived from the event type) and Retain.
	// webpush uses Topic too (see above).
	Topic  string `json:"topic,omitempty"`
	Retain bool   `json:"retain,omitempty"`
}

// PushSubscription is a browser's PushSubscription.toJSON(): the push
// service endpoint and the keys to encrypt for (RFC 8291).
type PushSubscription struct {
	Endpoint string   `json:"endpoint"`
	Keys     PushKeys `json:"keys"`
}

// PushKeys are base64url: P256DH the user agent's P-256 public key
// (uncompressed point, 65 bytes), Auth its 16-byte authentication secret.
type PushKeys struct {
	P256DH string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// Connection is an operator-owned broker connection. Brokers live on
// private networks a tenant must not be able to point herald at, so only
// an admin creates connections, and a tenanted subscription may use one
// only when Allows(tenant).
type Connection struct {
	Name string          `json:"name"`
	Type DestinationType `json:"type"`
	// URL is the broker URL (amqp://, nats://, redis://, mqtt://, or their
	// TLS forms). Its password is sealed at rest and never returned: API
	// answers show it as "***".
	URL string `json:"url"`
	// TLS, when set, configures the client side of TLS beyond the URL's
	// scheme.
	TLS *ConnectionTLS `json:"tls,omitempty"`
	// Tenants may use the connection; AllTenants opens it to every tenant.
	// Untenanted subscriptions (created by an admin) may use any.
	Tenants    []string  `json:"tenants"`
	AllTenants bool      `json:"all_tenants"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// ConnectionTLS is the client-side TLS of a Connection.
type ConnectionTLS struct {
	// CAFile is a PEM file of roots to trust instead of the system's.
	CAFile string `json:"ca_file,omitempty"`
	// CertFile and KeyFile are a client certificate.
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
	// ServerName overrides the name verified in the server certificate.
	ServerName string `json:"server_name,omitempty"`
	// InsecureSkipVerify disables verification (tests only).
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// Allows reports whether a subscription of tenant ("" = untenanted) may
// deliver through the connection.
func (c *Connection) Allows(tenant string) bool {
	return tenant == "" || c.AllTenants || slices.Contains(c.Tenants, tenant)
}
