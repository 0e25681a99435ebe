package push

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// WebSocket close codes the connection side uses (RFC 6455 §7.4.1), chosen
// as autopush uses them (its WebSocket session's close reasons): a uaid reset
// is a normal close, protocol violations 1002, frames of a kind the protocol
// does not have 1003, frames above maxFrameBytes 1009 (written by gorilla),
// everything else (store failure, excessive pings, ghosting, takeover,
// handshake or pong timeout) 1011. None of them is 4774, Firefox's "back
// off" code: every one of these closes allows an immediate reconnect.
const (
	closeUAIDReset   = 1000
	closeGoingAway   = 1001 // the node is shutting down
	closeProtocol    = 1002
	closeUnsupported = 1003
	closeError       = 1011
)

// Message types of the autopush protocol (the messageType field).
const (
	msgHello              = "hello"
	msgRegister           = "register"
	msgUnregister         = "unregister"
	msgAck                = "ack"
	msgNack               = "nack"
	msgPing               = "ping"
	msgBroadcastSubscribe = "broadcast_subscribe"
	msgNotification       = "notification"
	msgBroadcast          = "broadcast"
)

// frameError is a client frame the connection cannot accept; Code is the
// close code the session ends with.
type frameError struct {
	Code   int
	Reason string
	Err    error
}

func (e *frameError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("push frame: %s: %v", e.Reason, e.Err)
	}
	return "push frame: " + e.Reason
}

func (e *frameError) Unwrap() error { return e.Err }

func protocolError(reason string, err error) *frameError {
	return &frameError{Code: closeProtocol, Reason: reason, Err: err}
}

// clientMessage is one decoded client frame. Only the fields of Type are
// set; channel ids are in their canonical form (lower-case, dashed).
type clientMessage struct {
	Type string

	// hello
	UAID string // as sent, "" when absent; normalised by the session
	// hello, broadcast_subscribe
	Broadcasts map[string]string

	// register, unregister
	ChannelID string
	// register: the application server key, nil when absent
	Key *string
	// unregister (200/201/202), nack (301/302/303): metrics only; 0 when
	// absent
	Code int

	// ack
	Updates []ackUpdate
	// nack
	Version string
}

// ackUpdate is one entry of an ack's updates.
type ackUpdate struct {
	ChannelID string
	Version   string
	Code      int // 0 when absent
}

// Wire forms of the client frames. Fields a message type does not have are
// not declared, so a client sending extra fields (Firefox's use_webpush,
// channelIDs) is not refused over their types.
type (
	wireType struct {
		MessageType *string `json:"messageType"`
	}
	wireHello struct {
		UAID       *string           `json:"uaid"`
		Broadcasts map[string]string `json:"broadcasts"`
	}
	wireRegister struct {
		ChannelID string  `json:"channelID"`
		Key       *string `json:"key"`
	}
	wireUnregister struct {
		ChannelID string `json:"channelID"`
		Code      *int   `json:"code"`
	}
	wireAck struct {
		Updates []struct {
			ChannelID string `json:"channelID"`
			Version   string `json:"version"`
			Code      *int   `json:"code"`
		} `json:"updates"`
	}
	wireNack struct {
		Version string `json:"version"`
		Code    *int   `json:"code"`
	}
	wireBroadcastSubscribe struct {
		Broadcasts map[string]string `json:"broadcasts"`
	}
)

// decodeClientMessage decodes one text frame. The literal empty object
// (whitespace allowed) is a ping, as autopush and Firefox use it. An error
// is a *frameError: undecodable JSON or fields of the wrong type close with
// 1002, an unknown messageType with 1003.
func decodeClientMessage(data []byte) (*clientMessage, error) {
	if isEmptyObject(data) {
		return &clientMessage{Type: msgPing}, nil
	}
	if us, ok := decodeAckFast(data); ok {
		return ackMessage(us)
	}
	return decodeClientMessageJSON(data)
}

// ackMessage checks and canonicalises an ack's updates, from either
// decoder.
func ackMessage(us []wireAckUpdate) (*clientMessage, error) {
	m := &clientMessage{Type: msgAck, Updates: make([]ackUpdate, 0, len(us))}
	for _, u := range us {
		chid, ok := canonicalUUID(u.channelID)
		if !ok {
			return nil, protocolError("invalid channelID in ack", nil)
		}
		m.Updates = append(m.Updates, ackUpdate{ChannelID: chid, Version: u.version, Code: u.code})
	}
	return m, nil
}

// decodeClientMessageJSON is decodeClientMessage through encoding/json,
// for every frame (the ping aside) the ack fast path does not take.
func decodeClientMessageJSON(data []byte) (*clientMessage, error) {
	var t wireType
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, protocolError("invalid JSON", err)
	}
	if t.MessageType == nil {
		return nil, protocolError("missing messageType", nil)
	}
	m := &clientMessage{Type: *t.MessageType}
	var err error
	switch m.Type {
	case msgHello:
		var w wireHello
		if err = json.Unmarshal(data, &w); err == nil {
			if w.UAID != nil {
				m.UAID = *w.UAID
			}
			m.Broadcasts, err = checkClientBroadcasts(w.Broadcasts)
		}
	case msgRegister:
		var w wireRegister
		if err = json.Unmarshal(data, &w); err == nil {
			// register insists on the canonical form (autopush closes
			// otherwise); the session checks it to name it in the close.
			m.ChannelID, m.Key = w.ChannelID, w.Key
		}
	case msgUnregister:
		var w wireUnregister
		if err = json.Unmarshal(data, &w); err == nil {
			m.Code = intOr0(w.Code)
			var ok bool
			if m.ChannelID, ok = canonicalUUID(w.ChannelID); !ok {
				return nil, protocolError("invalid channelID", nil)
			}
		}
	case msgAck:
		var w wireAck
		if err = json.Unmarshal(data, &w); err == nil {
			us := make([]wireAckUpdate, len(w.Updates))
			for i, u := range w.Updates {
				us[i] = wireAckUpdate{channelID: u.ChannelID, version: u.Version, code: intOr0(u.Code)}
			}
			return ackMessage(us)
		}
	case msgNack:
		var w wireNack
		if err = json.Unmarshal(data, &w); err == nil {
			m.Version, m.Code = w.Version, intOr0(w.Code)
		}
	case msgPing:
	case msgBroadcastSubscribe:
		var w wireBroadcastSubscribe
		if err = json.Unmarshal(data, &w); err == nil {
			m.Broadcasts, err = checkClientBroadcasts(w.Broadcasts)
		}
	default:
		return nil, &frameError{Code: closeUnsupported, Reason: "unknown messageType"}
	}
	if err != nil {
		if fe := (*frameError)(nil); errors.As(err, &fe) {
			return nil, fe
		}
		return nil, protocolError("invalid "+m.Type, err)
	}
	return m, nil
}

// checkClientBroadcasts holds a user agent's broadcasts to the admin API's
// rules (CheckBroadcast): an id or version no operator could set closes
// the session with 1002 before anything is subscribed.
func checkClientBroadcasts(b map[string]string) (map[string]string, error) {
	for id, v := range b {
		if err := CheckBroadcast(id, v); err != nil {
			var he *herald.Error
			if errors.As(err, &he) && he.Field == "version" {
				return nil, protocolError("invalid broadcast version", err)
			}
			return nil, protocolError("invalid broadcast id", err)
		}
	}
	return b, nil
}

func intOr0(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// isEmptyObject reports whether data is "{}" with optional JSON whitespace.
func isEmptyObject(data []byte) bool {
	const ws = " \t\r\n"
	d := bytes.Trim(data, ws)
	if len(d) < 2 || d[0] != '{' || d[len(d)-1] != '}' {
		return false
	}
	return len(bytes.Trim(d[1:len(d)-1], ws)) == 0
}

// canonicalUUID accepts a UUID as hex digits in either case, with the four
// dashes or none (what Rust's Uuid parser accepts in acks and unregisters,
// less the braced and urn forms nobody sends) and returns it lower-case and
// dashed.
func canonicalUUID(s string) (string, bool) {
	h, ok := uuidHex(s)
	if !ok {
		return "", false
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], true
}

// isCanonicalUUID reports whether s is a lower-case dashed UUID: the only
// form register accepts.
func isCanonicalUUID(s string) bool {
	c, ok := canonicalUUID(s)
	return ok && c == s
}

// normalizeUAID returns a uaid sent in hello as 32 lower-case hex digits.
func normalizeUAID(s string) (string, bool) { return uuidHex(s) }

// uuidHex returns the 32 lower-case hex digits of a UUID written with its
// four dashes or without any.
func uuidHex(s string) (string, bool) {
	switch len(s) {
	case 32:
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return "", false
		}
		s = s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	default:
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", false
		}
	}
	return strings.ToLower(s), true
}

// decodeAppServerKey decodes register's key: base64url as Firefox sends it
// (padded), unpadded, or standard base64, as autopush accepts it. An empty
// key is refused: no VAPID key hashes to it, so its endpoint could never be
// used.
func decodeAppServerKey(s string) ([]byte, bool) {
	s = strings.TrimRight(s, "=")
	if s == "" {
		return nil, false
	}
	if b, err := base64.RawURLEncoding.DecodeString(s); err == nil {
		return b, true
	}
	if b, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		return b, true
	}
	return nil, false
}

// Server frames, in the exact field order of the reference's shapes.
type (
	helloReply struct {
		MessageType string         `json:"messageType"`
		UAID        string         `json:"uaid"`
		Status      int            `json:"status"`
		UseWebpush  bool           `json:"use_webpush"`
		Broadcasts  map[string]any `json:"broadcasts"`
	}
	registerReply struct {
		MessageType  string `json:"messageType"`
		ChannelID    string `json:"channelID"`
		Status       int    `json:"status"`
		PushEndpoint string `json:"pushEndpoint"`
	}
	unregisterReply struct {
		MessageType string `json:"messageType"`
		ChannelID   string `json:"channelID"`
		Status      int    `json:"status"`
	}
	notificationFrame struct {
		MessageType string            `json:"messageType"`
		ChannelID   string            `json:"channelID"`
		Version     string            `json:"version"`
		Data        string            `json:"data,omitempty"`
		Headers     map[string]string `json:"headers,omitempty"`
	}
	broadcastFrame struct {
		MessageType string         `json:"messageType"`
		Broadcasts  map[string]any `json:"broadcasts"`
	}
)

// pingReply is the answer to a ping: the literal empty object.
var pingReply = []byte("{}")

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings and plain structs are marshalled here.
		panic(fmt.Sprintf("push: marshal %T: %v", v, err))
	}
	return b
}

func encodeHello(uaid string, broadcasts map[string]any) []byte {
	if broadcasts == nil {
		broadcasts = map[string]any{}
	}
	return mustJSON(&helloReply{MessageType: msgHello, UAID: uaid, Status: 200, UseWebpush: true, Broadcasts: broadcasts})
}

func encodeRegister(chid string, status int, endpoint string) []byte {
	return mustJSON(&registerReply{MessageType: msgRegister, ChannelID: chid, Status: status, PushEndpoint: endpoint})
}

func encodeUnregister(chid string, status int) []byte {
	return mustJSON(&unregisterReply{MessageType: msgUnregister, ChannelID: chid, Status: status})
}

// encodeNotification writes m for the user agent: data (base64url without
// padding) and headers only when there is a body; TTL, topic and times are
// never sent.
//
// The frame is written by hand in one buffer: it is made for every
// message, and json.Marshal of the struct (a base64 string, then the same
// bytes escaped and copied again) was a tenth of a send's CPU (issue 25).
// The bytes are json.Marshal's exactly (notificationFrame's field order,
// the headers' keys sorted, its escaping), as TestEncodeNotificationAsMarshal
// checks.
func encodeNotification(m *store.PushMessage, version string) []byte {
	n := 64 + len(m.ChannelID) + len(version)
	if len(m.Data) > 0 {
		n += base64.RawURLEncoding.EncodedLen(len(m.Data)) + 16
		for k, v := range m.Headers {
			n += len(k) + len(v) + 8
		}
	}
	b := make([]byte, 0, n)
	b = append(b, `{"messageType":"`+msgNotification+`","channelID":`...)
	b = appendJSONString(b, m.ChannelID)
	b = append(b, `,"version":`...)
	b = appendJSONString(b, version)
	if len(m.Data) > 0 {
		b = append(b, `,"data":"`...)
		b = base64.RawURLEncoding.AppendEncode(b, m.Data)
		b = append(b, '"')
		if len(m.Headers) > 0 {
			keys := make([]string, 0, len(m.Headers))
			for k := range m.Headers {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			b = append(b, `,"headers":{`...)
			for i, k := range keys {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, k)
				b = append(b, ':')
				b = appendJSONString(b, m.Headers[k])
			}
			b = append(b, '}')
		}
	}
	return append(b, '}')
}

// appendJSONString appends s as json.Marshal writes a string: printable
// ASCII other than the quote, the backslash and <, >, & is copied, and
// anything else goes through json.Marshal itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return append(b, mustJSON(s)...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func encodeBroadcast(broadcasts map[string]any) []byte {
	return mustJSON(&broadcastFrame{MessageType: msgBroadcast, Broadcasts: broadcasts})
}

// errBinaryFrame is the reason a binary frame closes the session (1003).
var errBinaryFrame = errors.New("binary frames are not part of the protocol")
