package client

import (
	"encoding/json"
	"time"
)

// The types mirror the API's JSON (docs/api.md); timestamps stay RFC 3339
// strings so a value read and written back is byte-for-byte what the
// server sent.

// Filter is a subscription's filter: exactly one kind is set.
type Filter struct {
	CEL      string          `json:"cel,omitempty"`
	JMESPath string          `json:"jmespath,omitempty"`
	ESQuery  json.RawMessage `json:"es_query,omitempty"`
}

// RateLimit allows Max deliveries per PerSeconds seconds.
type RateLimit struct {
	Max        int `json:"max"`
	PerSeconds int `json:"per_seconds"`
}

// Subscription is a webhook subscription.
type Subscription struct {
	ID string `json:"id"`
	// URL and Method are a webhook's ("" for other destination types).
	URL            string            `json:"url,omitempty"`
	Method         string            `json:"method,omitempty"`
	Destination    Destination       `json:"destination"`
	EventTypes     []string          `json:"event_types"`
	Filter         *Filter           `json:"filter"`
	Secret         string            `json:"secret,omitempty"`
	Headers        map[string]string `json:"headers"`
	Ordering       string            `json:"ordering"`
	KeyIntervalMS  int64             `json:"key_interval_ms"`
	RateLimit      *RateLimit        `json:"rate_limit"`
	MaxInFlight    int               `json:"max_in_flight"`
	TimeoutMS      int64             `json:"timeout_ms"`
	Description    string            `json:"description"`
	Metadata       json.RawMessage   `json:"metadata"`
	State          string            `json:"state"`
	DisabledReason string            `json:"disabled_reason"`
	Tenant         string            `json:"tenant,omitempty"`
	AllTenants     bool              `json:"all_tenants,omitempty"`
	// AutoDisable is the subscription's own auto-disable rule: absent for
	// the server's, null for never, else an AutoDisable object.
	AutoDisable json.RawMessage `json:"auto_disable,omitempty"`
	// Health is set by GetSubscription only.
	Health    *SubscriptionHealth `json:"health,omitempty"`
	CreatedAt string              `json:"created_at"`
	UpdatedAt string              `json:"updated_at"`
}

// AutoDisable is an auto-disable rule: ConsecutiveFailures failed attempts
// in a row lasting at least MinDurationS seconds.
type AutoDisable struct {
	ConsecutiveFailures int   `json:"consecutive_failures"`
	MinDurationS        int64 `json:"min_duration_s"`
}

// SubscriptionHealth is how a subscription's endpoint has been answering.
type SubscriptionHealth struct {
	ConsecutiveFailures int      `json:"consecutive_failures"`
	FailingSince        *string  `json:"failing_since"`
	Attempts24h         int64    `json:"attempts_24h"`
	SuccessRate24h      *float64 `json:"success_rate_24h"`
	// AutoDisable is the rule in force; nil when never.
	AutoDisable *AutoDisable `json:"auto_disable"`
}

// SubscriptionList is a page of subscriptions.
type SubscriptionList struct {
	Data       []Subscription `json:"data"`
	NextCursor *string        `json:"next_cursor"`
}

// Secret is one signing secret; ExpiresAt is set on rotated-out ones.
type Secret struct {
	Secret    string  `json:"secret"`
	CreatedAt string  `json:"created_at"`
	ExpiresAt *string `json:"expires_at"`
}

// Secrets is the current secret and every one still signing.
type Secrets struct {
	Secret  string   `json:"secret"`
	Secrets []Secret `json:"secrets"`
}

// TestResult is the answer to a subscription test.
type TestResult struct {
	EventID    string `json:"event_id"`
	DeliveryID string `json:"delivery_id"`
}

// FilterTestEvent is the event a filter is tested against.
type FilterTestEvent struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Key     string          `json:"key,omitempty"`
	Version *int64          `json:"version,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Tenant is the event's tenant (filters see it as "tenant").
	Tenant string `json:"tenant,omitempty"`
}

// FilterTestParams is the body of POST /v1/filters/test.
type FilterTestParams struct {
	Filter     *Filter         `json:"filter"`
	EventTypes []string        `json:"event_types,omitempty"`
	Event      FilterTestEvent `json:"event"`
}

// FilterTestResult says whether the event would be delivered, and why not.
type FilterTestResult struct {
	Matched       bool `json:"matched"`
	TypeMatched   bool `json:"type_matched"`
	FilterMatched bool `json:"filter_matched"`
}

// EventInput is an event to publish.
type EventInput struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Key     string          `json:"key,omitempty"`
	Version *int64          `json:"version,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Tenant is the event's tenant; a tenant-confined token stamps its own.
	Tenant string `json:"tenant,omitempty"`
}

// PublishResult is the answer to a publish.
type PublishResult struct {
	ID         string `json:"id"`
	Duplicate  bool   `json:"duplicate"`
	Deliveries int    `json:"deliveries"`
}

// ErrorBody is the error of a rejected batch item.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// BatchItemResult is one item's outcome: status accepted, duplicate or
// rejected (with Error).
type BatchItemResult struct {
	Index      int        `json:"index"`
	ID         string     `json:"id,omitempty"`
	Status     string     `json:"status"`
	Deliveries *int       `json:"deliveries,omitempty"`
	Error      *ErrorBody `json:"error,omitempty"`
}

// BatchResult is the answer to a batch publish.
type BatchResult struct {
	Results []BatchItemResult `json:"results"`
}

// EventDelivery is a delivery as an event shows it.
type EventDelivery struct {
	ID             string `json:"id"`
	SubscriptionID string `json:"subscription_id"`
	State          string `json:"state"`
	Tier           int    `json:"tier"`
	AttemptCount   int    `json:"attempt_count"`
}

// Event is a stored event; Deliveries is set by GetEvent only.
type Event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Key        string          `json:"key,omitempty"`
	Version    *int64          `json:"version,omitempty"`
	Tenant     string          `json:"tenant,omitempty"`
	Data       json.RawMessage `json:"data"`
	Timestamp  string          `json:"timestamp"`
	Deliveries []EventDelivery `json:"deliveries,omitempty"`
}

// EventListParams filter GET /v1/events; zero values are left out.
type EventListParams struct {
	Type, Key    string
	Tenant       string
	Since, Until time.Time
	// ExcludeSystem leaves out herald's own herald.* events.
	ExcludeSystem bool
	Limit         int
	Cursor        string
}

// EventList is a page of events.
type EventList struct {
	Data       []Event `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// AttemptRequest is the request an attempt sent, rebuilt by the server.
type AttemptRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	// Rebuilt is always true: herald rebuilt this request from the
	// subscription as it is now (attempts stored before it kept headers).
	Rebuilt bool `json:"rebuilt"`
}

// Attempt is one delivery attempt.
type Attempt struct {
	N               int    `json:"n"`
	At              string `json:"at"`
	Tier            int    `json:"tier"`
	DurationMS      int64  `json:"duration_ms"`
	Status          int    `json:"status"`
	Error           string `json:"error"`
	ErrorMessage    string `json:"error_message"`
	ResponseExcerpt string `json:"response_excerpt"`
	// RequestHeaders and ResponseHeaders are what the attempt sent and
	// received (bounded, credentials redacted); nil when not recorded.
	RequestHeaders  map[string]string `json:"request_headers"`
	ResponseHeaders map[string]string `json:"response_headers"`
	// Request is set only for an attempt stored before herald kept
	// request headers: a rebuild, see AttemptRequest.Rebuilt.
	Request *AttemptRequest `json:"request,omitempty"`
}

// Delivery is one event to one subscription. Attempts, EventType and
// WaitingFor are set by GetDelivery only.
type Delivery struct {
	ID               string     `json:"id"`
	EventID          string     `json:"event_id"`
	SubscriptionID   string     `json:"subscription_id"`
	State            string     `json:"state"`
	Tier             int        `json:"tier"`
	AttemptCount     int        `json:"attempt_count"`
	Attempts         *[]Attempt `json:"attempts,omitempty"`
	NextAttemptAt    *string    `json:"next_attempt_at"`
	EventKey         string     `json:"event_key,omitempty"`
	EventVersion     *int64     `json:"event_version,omitempty"`
	LastStatus       int        `json:"last_status"`
	LastError        string     `json:"last_error"`
	LastErrorMessage string     `json:"last_error_message"`
	CreatedAt        string     `json:"created_at"`
	UpdatedAt        string     `json:"updated_at"`
	EventType        string     `json:"event_type,omitempty"`
	WaitingFor       *string    `json:"waiting_for,omitempty"`
}

// Final reports whether the delivery is in a state it leaves only by a
// retry or redrive.
func (d *Delivery) Final() bool {
	switch d.State {
	case "pending", "in_flight":
		return false
	}
	return true
}

// DeliveryListParams filter GET /v1/deliveries; zero values are left out.
type DeliveryListParams struct {
	SubscriptionID, EventID, State string
	Tenant                         string
	Since, Until                   time.Time
	Limit                          int
	Cursor                         string
}

// DeliveryList is a page of deliveries.
type DeliveryList struct {
	Data       []Delivery `json:"data"`
	NextCursor *string    `json:"next_cursor"`
}

// DeadLetterGroup counts one subscription's dead letters of one error
// class.
type DeadLetterGroup struct {
	SubscriptionID string `json:"subscription_id"`
	Error          string `json:"error"`
	Count          int    `json:"count"`
	OldestAt       string `json:"oldest_at"`
	NewestAt       string `json:"newest_at"`
}

// RedriveParams select dead letters to redrive. SubscriptionID is
// required; Limit 0 redrives all at once (the API allows 1 to 10,000).
type RedriveParams struct {
	SubscriptionID string
	Since, Until   time.Time
	Error          string
	Limit          int
	DryRun         bool
}

// RedriveResult is the answer to a redrive.
type RedriveResult struct {
	Redriven  int `json:"redriven"`
	Matched   int `json:"matched"`
	Remaining int `json:"remaining"`
}

// ResendResult is the answer to a resend.
type ResendResult struct {
	DeliveryID     string `json:"delivery_id"`
	EventID        string `json:"event_id"`
	SubscriptionID string `json:"subscription_id"`
}

// ReplayParams select the events to replay to a subscription. Since and
// Until are required, at most 31 days apart; EventTypes narrows the
// subscription's own types.
type ReplayParams struct {
	SubscriptionID string
	Since, Until   time.Time
	EventTypes     []string
	DryRun         bool
	// Cursor continues a truncated replay (its NextCursor).
	Cursor string
}

// ReplayResult is the answer to a replay.
type ReplayResult struct {
	Matched    int     `json:"matched"`
	Replayed   int     `json:"replayed"`
	DryRun     bool    `json:"dry_run"`
	Truncated  bool    `json:"truncated"`
	NextCursor *string `json:"next_cursor"`
}

// Tier is one retry tier's queue.
type Tier struct {
	Tier              int     `json:"tier"`
	Delay             string  `json:"delay,omitempty"`
	Removed           bool    `json:"removed,omitempty"`
	Pending           int64   `json:"pending"`
	InFlight          int64   `json:"in_flight"`
	Due               int64   `json:"due"`
	Held              int64   `json:"held"`
	OldestPendingAgeS float64 `json:"oldest_pending_age_s"`
}

// Stats is the answer of GET /v1/stats.
type Stats struct {
	Tiers          []Tier `json:"tiers"`
	Dead           int64  `json:"dead"`
	DeliveredTotal int64  `json:"delivered_total"`
	Throttled      int64  `json:"throttled"`
	Skipped        int64  `json:"skipped"`
	Superseded     int64  `json:"superseded"`
}

// SubscriptionStats are one subscription's outcomes in the window.
type SubscriptionStats struct {
	SubscriptionID string   `json:"subscription_id"`
	Delivered      int      `json:"delivered"`
	Dead           int      `json:"dead"`
	Pending        int      `json:"pending"`
	InFlight       int      `json:"in_flight"`
	SuccessRate    *float64 `json:"success_rate"`
}

// SubscriptionStatsList is the answer of GET /v1/stats/subscriptions.
type SubscriptionStatsList struct {
	Since string              `json:"since"`
	Data  []SubscriptionStats `json:"data"`
}

// TenantStats are one tenant's outcomes in the window and queue now
// (Tenant nil: untenanted subscriptions, or in Other the tenants summed).
type TenantStats struct {
	Tenant        *string  `json:"tenant"`
	Subscriptions int      `json:"subscriptions"`
	Delivered     int      `json:"delivered"`
	Dead          int      `json:"dead"`
	Pending       int      `json:"pending"`
	InFlight      int      `json:"in_flight"`
	SuccessRate   *float64 `json:"success_rate"`
}

// TenantStatsList is the answer of GET /v1/stats/tenants: the top tenants,
// and the rest summed in Other (nil when all are listed).
type TenantStatsList struct {
	Since string        `json:"since"`
	Data  []TenantStats `json:"data"`
	Other *TenantStats  `json:"other"`
}

// TokenInput is a token to create: Scopes from events:publish,
// events:read, subscriptions:read, subscriptions:write, deliveries:read,
// deliveries:write and admin; Tenant confines it; ExpiresAt (zero: never)
// ends it.
type TokenInput struct {
	Name      string    `json:"name"`
	Scopes    []string  `json:"scopes"`
	Tenant    string    `json:"tenant,omitempty"`
	ExpiresAt time.Time `json:"-"`
}

// Token is a stored API token; Token (the secret) is set only in
// CreateToken's answer.
type Token struct {
	ID        string   `json:"id"`
	Token     string   `json:"token,omitempty"`
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	Tenant    *string  `json:"tenant"`
	ExpiresAt *string  `json:"expires_at"`
	CreatedAt string   `json:"created_at"`
}

// Whoami is the calling token as GET /v1/whoami describes it.
type Whoami struct {
	// TokenID is "" for the configured --api-token.
	TokenID string   `json:"token_id"`
	Scopes  []string `json:"scopes"`
	// Tenant is "" for a token not confined to a tenant.
	Tenant string `json:"tenant"`
	Admin  bool   `json:"admin"`
}

// TokenList is every stored token.
type TokenList struct {
	Data []Token `json:"data"`
}

// PortalTheme is how a consumer portal looks; every field is optional.
// Logo is a data: URL (data:image/png;base64,…), at most 64 KiB decoded.
type PortalTheme struct {
	Name   string `json:"name,omitempty"`
	Accent string `json:"accent,omitempty"`
	Logo   string `json:"logo,omitempty"`
}

// PortalLinkInput is a portal link to create: TTL (zero: the server's
// default, 1 h; at most 24 h, whole seconds) and an optional Theme.
type PortalLinkInput struct {
	TTL   time.Duration
	Theme *PortalTheme
}

// PortalLink is a one-time link opening the consumer portal for a tenant.
type PortalLink struct {
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at"`
}

// Destination is where a subscription delivers: Type selects the fields
// that apply (answers show all of them for the type, none of the others).
// Build one for a create or update with the Webhook, WebPush, AMQP,
// NATS, Redis and MQTT constructors or by hand.
type Destination struct {
	// Type is webhook, webpush, amqp, nats, redis, mqtt or listen.
	Type string `json:"type"`
	// webhook
	URL    *string `json:"url,omitempty"`
	Method *string `json:"method,omitempty"`
	// webpush: the browser's PushSubscription, Urgency (very-low, low,
	// normal, high), TTLS (seconds, ≤ 2419200) and Topic.
	Subscription *PushSubscription `json:"subscription,omitempty"`
	Urgency      *string           `json:"urgency,omitempty"`
	TTLS         *int              `json:"ttl_s,omitempty"`
	// brokers: the connection's name (see CreateConnection) and where on
	// it; an empty RoutingKey, Subject or Topic is derived from the event
	// type when sent.
	Connection *string `json:"connection,omitempty"`
	Exchange   *string `json:"exchange,omitempty"`
	RoutingKey *string `json:"routing_key,omitempty"`
	Subject    *string `json:"subject,omitempty"`
	Stream     *string `json:"stream,omitempty"`
	MaxLen     *int64  `json:"maxlen,omitempty"`
	// Topic is the mqtt topic, or the webpush Topic.
	Topic  *string `json:"topic,omitempty"`
	Retain *bool   `json:"retain,omitempty"`
}

// PushSubscription is a browser's PushSubscription.toJSON().
type PushSubscription struct {
	Endpoint string   `json:"endpoint"`
	Keys     PushKeys `json:"keys"`
}

// PushKeys are the browser's P-256 public key and auth secret, base64url.
type PushKeys struct {
	P256DH string `json:"p256dh"`
	Auth   string `json:"auth"`
}

func ptr[T any](v T) *T { return &v }

// WebhookDestination is a webhook to url with method ("" = POST).
func WebhookDestination(url, method string) Destination {
	d := Destination{Type: "webhook", URL: ptr(url)}
	if method != "" {
		d.Method = ptr(method)
	}
	return d
}

// WebPushDestination delivers to a browser's push subscription.
func WebPushDestination(sub PushSubscription) Destination {
	return Destination{Type: "webpush", Subscription: &sub}
}

// AMQPDestination publishes to exchange ("" = the default exchange) with
// routingKey ("" = the event type) on connection.
func AMQPDestination(connection, exchange, routingKey string) Destination {
	return Destination{Type: "amqp", Connection: ptr(connection), Exchange: ptr(exchange), RoutingKey: ptr(routingKey)}
}

// NATSDestination publishes to subject ("" = derived from the event type)
// on connection.
func NATSDestination(connection, subject string) Destination {
	return Destination{Type: "nats", Connection: ptr(connection), Subject: ptr(subject)}
}

// RedisDestination appends to stream on connection, trimmed to about
// maxLen entries (0 = no trimming).
func RedisDestination(connection, stream string, maxLen int64) Destination {
	return Destination{Type: "redis", Connection: ptr(connection), Stream: ptr(stream), MaxLen: ptr(maxLen)}
}

// MQTTDestination publishes to topic ("" = derived from the event type) on
// connection.
func MQTTDestination(connection, topic string, retain bool) Destination {
	return Destination{Type: "mqtt", Connection: ptr(connection), Topic: ptr(topic), Retain: ptr(retain)}
}

// Connection is an operator-owned broker connection. URL never holds the
// password: answers show it as "***".
type Connection struct {
	Name      string            `json:"name"`
	Type      string            `json:"type"`
	URL       string            `json:"url"`
	TLS       *ConnectionTLS    `json:"tls"`
	Tenants   ConnectionTenants `json:"tenants"`
	CreatedAt string            `json:"created_at"`
	UpdatedAt string            `json:"updated_at"`
}

// ConnectionTLS is a connection's client-side TLS (files on the herald
// node).
type ConnectionTLS struct {
	CAFile             string `json:"ca_file,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	ServerName         string `json:"server_name,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// ConnectionTenants are the tenants granted a connection: All, or the
// List (JSON: "all" or an array).
type ConnectionTenants struct {
	All  bool
	List []string
}

// MarshalJSON writes "all" or the list.
func (t ConnectionTenants) MarshalJSON() ([]byte, error) {
	if t.All {
		return []byte(`"all"`), nil
	}
	if t.List == nil {
		return []byte(`[]`), nil
	}
	return json.Marshal(t.List)
}

// UnmarshalJSON reads "all" or a list.
func (t *ConnectionTenants) UnmarshalJSON(b []byte) error {
	*t = ConnectionTenants{}
	if string(b) == `"all"` {
		t.All = true
		return nil
	}
	return json.Unmarshal(b, &t.List)
}

// ConnectionInput is a connection to create: Type amqp, nats, redis or
// mqtt, and a URL whose scheme fits it.
type ConnectionInput struct {
	Name    string            `json:"name"`
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	TLS     *ConnectionTLS    `json:"tls,omitempty"`
	Tenants ConnectionTenants `json:"tenants"`
}

// ConnectionList is a page of connections, in name order.
type ConnectionList struct {
	Data       []Connection `json:"data"`
	NextCursor *string      `json:"next_cursor"`
}

// Source is a broker queue, stream or topic herald consumes events from,
// through a connection of the same Type: amqp reads Queue; nats Stream
// with the Durable consumer and an optional Subject filter; redis Stream
// with the consumer Group; mqtt Topic (a filter). Status is set only by
// GetSource.
type Source struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Connection string         `json:"connection"`
	Queue      string         `json:"queue,omitempty"`
	Stream     string         `json:"stream,omitempty"`
	Durable    string         `json:"durable,omitempty"`
	Subject    string         `json:"subject,omitempty"`
	Group      string         `json:"group,omitempty"`
	Topic      string         `json:"topic,omitempty"`
	Mapping    *SourceMapping `json:"mapping"`
	Tenant     string         `json:"tenant,omitempty"`
	Ordered    bool           `json:"ordered"`
	Enabled    bool           `json:"enabled"`
	// Prefetch 0 means the server's default (256).
	Prefetch  int           `json:"prefetch"`
	CreatedAt string        `json:"created_at"`
	UpdatedAt string        `json:"updated_at"`
	Status    *SourceStatus `json:"status,omitempty"`
}

// SourceMapping holds a JMESPath expression per event field over the
// message document {body, headers, routing_key | subject | stream |
// topic, message_id, timestamp}; "" keeps the field's default (docs/api.md
// "Sources").
type SourceMapping struct {
	ID      string `json:"id,omitempty"`
	Type    string `json:"type,omitempty"`
	Key     string `json:"key,omitempty"`
	Version string `json:"version,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	Data    string `json:"data,omitempty"`
}

// SourceStatus is a source's status over every node.
type SourceStatus struct {
	// State: consuming, connecting, store_unavailable, failed, standby,
	// disabled, or idle when no node reported lately.
	State      string `json:"state"`
	Consumed   int64  `json:"consumed"`
	Duplicates int64  `json:"duplicates"`
	Rejected   int64  `json:"rejected"`
	LastError  string `json:"last_error,omitempty"`
	// Pending is the broker's backlog where it reports one.
	Pending       *int64             `json:"pending,omitempty"`
	Nodes         []SourceNodeStatus `json:"nodes"`
	RecentRejects []SourceReject     `json:"recent_rejects"`
}

// SourceNodeStatus is one node's view of a source.
type SourceNodeStatus struct {
	Node       string `json:"node"`
	State      string `json:"state"`
	Consumed   int64  `json:"consumed"`
	Duplicates int64  `json:"duplicates"`
	Rejected   int64  `json:"rejected"`
	LastError  string `json:"last_error,omitempty"`
	Pending    *int64 `json:"pending,omitempty"`
	UpdatedAt  string `json:"updated_at"`
}

// SourceReject is one message rejected without requeue, with its Reason
// (not_json, too_large, mapping, invalid_event, tenant).
type SourceReject struct {
	At        string `json:"at"`
	Node      string `json:"node,omitempty"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	MessageID string `json:"message_id,omitempty"`
	Excerpt   string `json:"excerpt,omitempty"`
}

// SourceInput is a source to create. Enabled nil means true; Prefetch 0
// the server's default.
type SourceInput struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Connection string         `json:"connection"`
	Queue      string         `json:"queue,omitempty"`
	Stream     string         `json:"stream,omitempty"`
	Durable    string         `json:"durable,omitempty"`
	Subject    string         `json:"subject,omitempty"`
	Group      string         `json:"group,omitempty"`
	Topic      string         `json:"topic,omitempty"`
	Mapping    *SourceMapping `json:"mapping,omitempty"`
	Tenant     string         `json:"tenant,omitempty"`
	Ordered    bool           `json:"ordered,omitempty"`
	Enabled    *bool          `json:"enabled,omitempty"`
	Prefetch   int            `json:"prefetch,omitempty"`
}

// SourceList is a page of sources, in name order.
type SourceList struct {
	Data       []Source `json:"data"`
	NextCursor *string  `json:"next_cursor"`
}

// EventType is an entry of the event type catalog: an exact event type
// with what it means, the JSON Schema of its data and an example (Schema
// and Example are JSON; "null" when none). With Validate set, publishes
// of the type whose data does not conform are refused (422
// schema_mismatch). Deprecated types are listed only on request.
type EventType struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Example     json.RawMessage `json:"example"`
	Deprecated  bool            `json:"deprecated"`
	Validate    bool            `json:"validate"`
	CreatedAt   string          `json:"created_at"`
	UpdatedAt   string          `json:"updated_at"`
}

// EventTypeInput is an event type to create. Schema and Example are JSON
// (nil: none); the example must conform to the schema.
type EventTypeInput struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Example     json.RawMessage `json:"example,omitempty"`
	Deprecated  bool            `json:"deprecated,omitempty"`
	Validate    bool            `json:"validate,omitempty"`
}

// EventTypeList is a page of event types, in name order.
type EventTypeList struct {
	Data       []EventType `json:"data"`
	NextCursor *string     `json:"next_cursor"`
}
