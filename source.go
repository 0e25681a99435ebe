package herald

import "time"

// Source is an operator-owned broker subscription that herald consumes
// events from: each message becomes an event through the same group commit
// as POST /v1/events, and is acknowledged to the broker only after that
// commit returned. Type is one of the broker destination types (amqp,
// nats, redis, mqtt) and must equal its Connection's type; the fields of
// the other types stay empty.
type Source struct {
	// Name identifies the source (ValidConnectionName's alphabet).
	Name       string          `json:"name"`
	Type       DestinationType `json:"type"`
	Connection string          `json:"connection"`

	// amqp: Queue, an existing queue (declared passively).
	Queue string `json:"queue,omitempty"`
	// nats: Stream, the Durable pull consumer's name (default "herald";
	// created when missing) and an optional Subject filter.
	// redis: Stream and the consumer Group (default "herald"; created with
	// MKSTREAM when missing).
	Stream  string `json:"stream,omitempty"`
	Durable string `json:"durable,omitempty"`
	Subject string `json:"subject,omitempty"`
	Group   string `json:"group,omitempty"`
	// mqtt: Topic, a topic filter (wildcards allowed), subscribed as the
	// shared subscription $share/herald/<topic> so that several nodes
	// compete for messages.
	Topic string `json:"topic,omitempty"`

	// Mapping turns a broker message into an event (nil: the defaults of
	// every field).
	Mapping *SourceMapping `json:"mapping,omitempty"`
	// Tenant pins the source to a tenant: every event it publishes is
	// that tenant's, and a mapping that yields another tenant is rejected.
	Tenant string `json:"tenant,omitempty"`
	// Ordered makes one node at a time the consumer (a lease), so broker
	// order becomes publish order; otherwise every node consumes.
	Ordered bool `json:"ordered"`
	Enabled bool `json:"enabled"`
	// Prefetch is the most messages one consumer takes in a batch (one
	// group commit; XREADGROUP COUNT); 0 means DefaultSourcePrefetch. A
	// consumer receives the next batch while the previous one commits, so
	// it holds up to twice Prefetch unacknowledged (AMQP basic.qos,
	// JetStream MaxAckPending, MQTT receive maximum).
	Prefetch int `json:"prefetch,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Source defaults and limits.
const (
	// DefaultSourcePrefetch is Source.Prefetch's default: enough to fill a
	// group commit, little enough that a backlog costs bounded memory
	// (2 × prefetch × MaxSourceBody at worst, two batches in flight).
	DefaultSourcePrefetch = 256
	// MaxSourcePrefetch caps Source.Prefetch.
	MaxSourcePrefetch = 10000
	// DefaultSourceConsumer is the default NATS durable and Redis group
	// name, and the MQTT shared-subscription group.
	DefaultSourceConsumer = "herald"
	// SourceRecentRejects is how many rejected messages per source the
	// store keeps (the newest) for GET /v1/sources/{name}.
	SourceRecentRejects = 100
)

// PrefetchOrDefault is s.Prefetch, or DefaultSourcePrefetch when unset.
func (s *Source) PrefetchOrDefault() int {
	if s.Prefetch > 0 {
		return s.Prefetch
	}
	return DefaultSourcePrefetch
}

// SourceMapping holds one JMESPath expression per event field, evaluated
// over the message document {body, headers, routing_key | subject |
// topic | stream, message_id, timestamp}. An empty expression keeps the
// field's default: id = the broker's message id, else the SHA-256 of the
// body (so a redelivery is still a duplicate); type = the routing key,
// subject or topic (the stream name for redis); key, version and tenant
// unset (tenant: the source's own); data = the whole body.
type SourceMapping struct {
	ID      string `json:"id,omitempty"`
	Type    string `json:"type,omitempty"`
	Key     string `json:"key,omitempty"`
	Version string `json:"version,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	Data    string `json:"data,omitempty"`
}

// Source states, as GET /v1/sources/{name} reports them per node.
const (
	// SourceConnecting: dialling the broker or setting up the consumer.
	SourceConnecting = "connecting"
	// SourceConsuming: connected and receiving.
	SourceConsuming = "consuming"
	// SourceFailed: the last attempt failed (LastError says why); the
	// node retries with backoff.
	SourceFailed = "failed"
	// SourceStoreUnavailable: the store refused a commit; the node stopped
	// consuming, acknowledged nothing since, and resumes by itself.
	SourceStoreUnavailable = "store_unavailable"
	// SourceStandby: an ordered source another node is consuming.
	SourceStandby = "standby"
	// SourceDisabled: Enabled is false.
	SourceDisabled = "disabled"
)

// Reject reasons (the reason label of herald_source_rejected_total and
// SourceReject.Reason).
const (
	RejectNotJSON  = "not_json"
	RejectTooLarge = "too_large"
	RejectMapping  = "mapping"
	RejectInvalid  = "invalid_event"
	RejectTenant   = "tenant"
	// RejectSchema: the event's data does not conform to its type's
	// schema in the event type catalog (validate on).
	RejectSchema = "schema_mismatch"
)

// SourceReject is one rejected message.
type SourceReject struct {
	At     time.Time `json:"at"`
	Node   string    `json:"node,omitempty"`
	Reason string    `json:"reason"`
	// Message says what was wrong, as the API would for the same event.
	Message string `json:"message"`
	// MessageID is the broker's id of the message, when it has one.
	MessageID string `json:"message_id,omitempty"`
	// Excerpt is the start of the body (CleanExcerpt).
	Excerpt string `json:"excerpt,omitempty"`
}

// SourceNodeStatus is one node's view of a source.
type SourceNodeStatus struct {
	Node  string `json:"node"`
	State string `json:"state"`
	// Consumed counts messages that became stored events (duplicates
	// included), Duplicates those whose event already existed, Rejected
	// the poison messages: cumulative since the source was created.
	Consumed   int64  `json:"consumed"`
	Duplicates int64  `json:"duplicates"`
	Rejected   int64  `json:"rejected"`
	LastError  string `json:"last_error,omitempty"`
	// Pending is the backlog where the broker reports it (AMQP queue
	// depth, JetStream pending, Redis group lag); nil when unknown.
	Pending   *int64    `json:"pending,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SourceStatus is a source's status over every node.
type SourceStatus struct {
	// State is the best state over nodes (consuming > connecting >
	// store_unavailable > failed > standby > disabled), "idle" when no
	// node reported.
	State         string             `json:"state"`
	Consumed      int64              `json:"consumed"`
	Duplicates    int64              `json:"duplicates"`
	Rejected      int64              `json:"rejected"`
	LastError     string             `json:"last_error,omitempty"`
	Pending       *int64             `json:"pending,omitempty"`
	Nodes         []SourceNodeStatus `json:"nodes"`
	RecentRejects []SourceReject     `json:"recent_rejects"`
}

// SourceNodeStale is how long a node's status row counts toward a
// source's State after its last report: nodes report every few seconds
// while they run, so an older row is a node that stopped.
const SourceNodeStale = 30 * time.Second

// sourceStateRank orders states for SourceStatus.State: the best a live
// node reports wins.
var sourceStateRank = map[string]int{
	SourceConsuming: 6, SourceConnecting: 5, SourceStoreUnavailable: 4,
	SourceFailed: 3, SourceStandby: 2, SourceDisabled: 1,
}

// CombineSourceStatus sums the nodes' counters and picks the state and
// last error of the live nodes (reported within SourceNodeStale of now);
// rejects are the newest first. State is "idle" when no node is live.
func CombineSourceStatus(nodes []SourceNodeStatus, rejects []SourceReject, now time.Time) SourceStatus {
	st := SourceStatus{State: "idle", Nodes: nodes, RecentRejects: rejects}
	if st.Nodes == nil {
		st.Nodes = []SourceNodeStatus{}
	}
	if st.RecentRejects == nil {
		st.RecentRejects = []SourceReject{}
	}
	best, lastErrAt := 0, time.Time{}
	for _, n := range nodes {
		st.Consumed += n.Consumed
		st.Duplicates += n.Duplicates
		st.Rejected += n.Rejected
		if now.Sub(n.UpdatedAt) > SourceNodeStale {
			continue
		}
		if r := sourceStateRank[n.State]; r > best {
			best, st.State = r, n.State
		}
		if n.LastError != "" && n.UpdatedAt.After(lastErrAt) {
			st.LastError, lastErrAt = n.LastError, n.UpdatedAt
		}
		if n.Pending != nil {
			p := *n.Pending
			if st.Pending != nil && *st.Pending > p {
				p = *st.Pending
			}
			st.Pending = &p
		}
	}
	return st
}
