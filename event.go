package herald

import (
	"encoding/json"
	"strings"
	"time"
)

// Event is one published fact. Events are immutable once stored.
type Event struct {
	// ID is the producer's idempotency id when one was given, else a generated
	// "evt_" id. A second publish with the same ID creates nothing.
	ID   string `json:"id"`
	Type string `json:"type"`
	Key  string `json:"key,omitempty"`
	// Version orders events of one Key for "latest" subscriptions; nil when
	// the producer gave none.
	Version *int64          `json:"version,omitempty"`
	Data    json.RawMessage `json:"data"`
	// Tenant is the producer's tenant (ValidTenant), "" when none.
	Tenant string `json:"tenant,omitempty"`
	// CreatedAt is when herald accepted the event (the "timestamp" of the
	// delivered body).
	CreatedAt time.Time `json:"timestamp"`
}

// Envelope is the JSON document filters match against and the body a
// subscriber receives, with data decoded by encoding/json.
func (e *Event) Envelope() map[string]any {
	var data any
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &data)
	}
	return e.EnvelopeWith(data)
}

// EnvelopeWith is Envelope with data already decoded by the caller (the
// filter package decodes numbers its own way): {"id","type","timestamp",
// "key","version","tenant","data"}, key, version and tenant absent when the
// event has none.
func (e *Event) EnvelopeWith(data any) map[string]any {
	m := map[string]any{
		"id":        e.ID,
		"type":      e.Type,
		"timestamp": FormatTime(e.CreatedAt),
		"data":      data,
	}
	if e.Key != "" {
		m["key"] = e.Key
	}
	if e.Version != nil {
		m["version"] = *e.Version
	}
	if e.Tenant != "" {
		m["tenant"] = e.Tenant
	}
	return m
}

// FormatTime renders a timestamp as herald does everywhere: RFC 3339 in UTC
// with the fractional seconds that are not zero.
func FormatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}

// FormatDelay is time.Duration.String without zero trailing units ("1m",
// not "1m0s"; "24h", not "24h0m0s"); it still parses with
// time.ParseDuration.
func FormatDelay(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Body renders the request body a subscriber receives:
// {"id","type","timestamp","key","version","tenant","data"} with key,
// version and tenant omitted when absent. Data is copied verbatim, not re-encoded.
func (e *Event) Body() []byte {
	type body struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Key       string          `json:"key,omitempty"`
		Version   *int64          `json:"version,omitempty"`
		Tenant    string          `json:"tenant,omitempty"`
		Data      json.RawMessage `json:"data"`
	}
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	b, _ := json.Marshal(body{
		ID: e.ID, Type: e.Type, Timestamp: FormatTime(e.CreatedAt),
		Key: e.Key, Version: e.Version, Tenant: e.Tenant, Data: data,
	})
	return b
}

// System event types herald publishes into its own pipeline. Operators
// subscribe to them like to any other type. Deliveries of herald.* events
// never raise further herald.delivery.dead events, so a broken alert
// endpoint cannot loop.
const (
	EventTypeDeliveryDead         = "herald.delivery.dead"
	EventTypeSubscriptionDisabled = "herald.subscription.disabled"
	EventTypeQueueStale           = "herald.queue.stale"
)

// IsSystemEventType reports whether t is one of herald's own event types.
func IsSystemEventType(t string) bool {
	return len(t) > 7 && t[:7] == "herald."
}
