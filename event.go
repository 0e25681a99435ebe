package herald

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
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
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	// Written by hand, byte for byte what json.Marshal of the envelope
	// gives (FuzzEventBody): Marshal compacts and escapes the data again for
	// every attempt (4% of the node's CPU at full load), though it was
	// stored compact. Anything Marshal would escape differently (see
	// jsonSafe) takes the json.Marshal path.
	ts := FormatTime(e.CreatedAt)
	if !jsonSafe(e.ID) || !jsonSafe(e.Type) || !jsonSafe(e.Key) || !jsonSafe(e.Tenant) || !dataSafe(data) {
		return e.marshalBody(data, ts)
	}
	b := make([]byte, 0, len(data)+len(e.ID)+len(e.Type)+len(ts)+len(e.Key)+len(e.Tenant)+96)
	b = append(b, `{"id":"`...)
	b = append(b, e.ID...)
	b = append(b, `","type":"`...)
	b = append(b, e.Type...)
	b = append(b, `","timestamp":"`...)
	b = append(b, ts...)
	b = append(b, '"')
	if e.Key != "" {
		b = append(b, `,"key":"`...)
		b = append(b, e.Key...)
		b = append(b, '"')
	}
	if e.Version != nil {
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, *e.Version, 10)
	}
	if e.Tenant != "" {
		b = append(b, `,"tenant":"`...)
		b = append(b, e.Tenant...)
		b = append(b, '"')
	}
	b = append(b, `,"data":`...)
	b = append(b, data...)
	return append(b, '}')
}

func (e *Event) marshalBody(data json.RawMessage, ts string) []byte {
	type body struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Key       string          `json:"key,omitempty"`
		Version   *int64          `json:"version,omitempty"`
		Tenant    string          `json:"tenant,omitempty"`
		Data      json.RawMessage `json:"data"`
	}
	b, _ := json.Marshal(body{
		ID: e.ID, Type: e.Type, Timestamp: ts,
		Key: e.Key, Version: e.Version, Tenant: e.Tenant, Data: data,
	})
	return b
}

// jsonSafe reports whether json.Marshal writes s as its bytes in quotes:
// printable ASCII but for the characters it escapes.
func jsonSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// dataSafe reports whether json.Marshal writes the RawMessage data as it
// is: it is compact and holds none of the characters Marshal escapes in
// strings ('<', '>', '&', U+2028, U+2029, all of whose encodings start
// with 0xE2) nor invalid UTF-8 (which Marshal replaces); a document with
// any byte >= 0x80 goes the slow way.
func dataSafe(data []byte) bool {
	// IndexByte is vectorised: three passes over 1 KiB cost less than one
	// byte loop.
	if bytes.IndexByte(data, '<') >= 0 || bytes.IndexByte(data, '>') >= 0 || bytes.IndexByte(data, '&') >= 0 {
		return false
	}
	if !isASCII(data) {
		return false
	}
	return IsCompactJSON(data)
}

// isASCII reports whether b holds no byte >= 0x80, eight bytes at a time.
func isASCII(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// IsCompactJSON reports whether valid JSON b holds no whitespace outside
// its strings, which is when json.Compact returns it unchanged.
func IsCompactJSON(b []byte) bool {
	// Most documents hold no whitespace byte at all, inside strings or
	// out: four vectorised searches say so without the byte loop.
	if bytes.IndexByte(b, ' ') < 0 && bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\t') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return true
	}
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
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
