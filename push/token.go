package push

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fernet/fernet-go"
)

// Keys are the Fernet keys of --push-crypto-keys: the first encrypts, all
// decrypt (key rotation, as autopush's MultiFernet).
type Keys struct {
	keys []*fernet.Key
	// seal makes tokens with the first key (fernet.go).
	seal *sealer
	// internal are the node-to-node MAC keys derived from each key, first
	// key first.
	internal [][]byte
}

// internalLabel derives a node-to-node MAC key from a push key, so the
// bearer proves only that the caller holds a push key.
const internalLabel = "herald push internal v1"

// InternalTokenWindow is how far a node-to-node bearer's time may be from
// the receiver's clock (either way) and still be accepted: nodes' clocks
// must agree within it (NTP does). A bearer seen on the wire can be
// replayed only within it.
const InternalTokenWindow = time.Minute

// ParseKeys reads --push-crypto-keys: one or more Fernet keys (32 bytes,
// URL-safe or standard base64), separated by commas, optionally in
// brackets as autopush writes them ("[k1,k2]").
func ParseKeys(s string) (*Keys, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	k := &Keys{}
	for i, part := range strings.Split(s, ",") {
		part = strings.Trim(strings.TrimSpace(part), `"'`)
		if part == "" {
			continue
		}
		fk, err := fernet.DecodeKey(part)
		if err != nil {
			return nil, fmt.Errorf("key %d is not a Fernet key (32 bytes, base64): %w", i+1, err)
		}
		k.keys = append(k.keys, fk)
		mac := hmac.New(sha256.New, fk[:])
		mac.Write([]byte(internalLabel))
		k.internal = append(k.internal, mac.Sum(nil))
	}
	if len(k.keys) == 0 {
		return nil, errors.New("no key given")
	}
	k.seal = newSealer(k.keys[0])
	return k, nil
}

// GenerateKey returns a new random Fernet key in the form ParseKeys reads.
func GenerateKey() string {
	var k fernet.Key
	if err := k.Generate(); err != nil {
		panic("push: no randomness: " + err.Error())
	}
	return k.Encode()
}

// Endpoint is what an endpoint token carries.
type Endpoint struct {
	UAID      string // 32 lower-case hex digits
	ChannelID string // lower-case dashed UUID
	// KeyHash is the SHA-256 of the application server key (v2 tokens),
	// nil for v1.
	KeyHash []byte
}

// errInvalidToken is every token failure: the sender learns nothing more
// (and the log is not spammed: forged endpoints are common).
func errInvalidToken(msg string) *Error {
	return &Error{Status: http.StatusNotFound, Errno: ErrnoInvalidToken, Message: msg}
}

// EndpointToken encrypts e: a v1 token (uaid‖chid, 140 characters) when
// e.KeyHash is nil, else v2 (uaid‖chid‖hash, 183 characters). Trailing '='
// are stripped.
func (k *Keys) EndpointToken(e *Endpoint) (string, error) {
	uaid, err := hex.DecodeString(e.UAID)
	if err != nil || len(uaid) != 16 {
		return "", fmt.Errorf("push: uaid %q is not 32 hex digits", e.UAID)
	}
	chid, ok := parseUUID(e.ChannelID)
	if !ok {
		return "", fmt.Errorf("push: channel id %q is not a UUID", e.ChannelID)
	}
	msg := make([]byte, 0, 64)
	msg = append(msg, uaid...)
	msg = append(msg, chid[:]...)
	if e.KeyHash != nil {
		if len(e.KeyHash) != sha256.Size {
			return "", errors.New("push: key hash is not a SHA-256")
		}
		msg = append(msg, e.KeyHash...)
	}
	return k.encrypt(msg)
}

// ParseEndpointToken decrypts a token of API version 1 or 2 (the path's
// /v1/ or /v2/; /wpush/{token} is 1). Any failure (bad base64, bad
// signature, wrong length for the version) is a *Error 404 errno 102.
func (k *Keys) ParseEndpointToken(token string, version int) (*Endpoint, error) {
	want := 32
	switch version {
	case 0, 1:
	case 2:
		want = 64
	default:
		return nil, errInvalidToken("unknown endpoint version")
	}
	msg := k.decrypt(token)
	if msg == nil {
		return nil, errInvalidToken("invalid endpoint token")
	}
	if len(msg) != want {
		return nil, errInvalidToken("invalid endpoint token for this version")
	}
	e := &Endpoint{UAID: hex.EncodeToString(msg[:16]), ChannelID: formatUUID(msg[16:32])}
	if want == 64 {
		e.KeyHash = append([]byte(nil), msg[32:]...)
	}
	return e, nil
}

// MessageRef locates a stored message: the /m/{id} path and the version
// sent to the user agent are Fernet-encrypted MessageRefs.
type MessageRef struct {
	UAID      string
	ChannelID string
	ID        string // store.PushMessage.ID
	Topic     string // "" without a topic
}

// MessageID encrypts r as "02:uaid:chid:id" or, with a topic,
// "01:uaid:chid:id:topic" (autopush's prefixes; a topic is base64url
// text, so ':' cannot occur in it).
func (k *Keys) MessageID(r *MessageRef) (string, error) {
	if strings.Contains(r.ID, ":") || strings.Contains(r.Topic, ":") {
		return "", errors.New("push: message id or topic holds ':'")
	}
	var s string
	if r.Topic == "" {
		s = "02:" + r.UAID + ":" + r.ChannelID + ":" + r.ID
	} else {
		s = "01:" + r.UAID + ":" + r.ChannelID + ":" + r.ID + ":" + r.Topic
	}
	return k.encrypt([]byte(s))
}

// ParseMessageID decrypts a message id; any failure is a *Error 404
// errno 102.
func (k *Keys) ParseMessageID(s string) (*MessageRef, error) {
	msg := k.decrypt(s)
	if msg == nil {
		return nil, errInvalidToken("invalid message id")
	}
	parts := strings.Split(string(msg), ":")
	r := &MessageRef{}
	switch {
	case len(parts) == 4 && parts[0] == "02":
	case len(parts) == 5 && parts[0] == "01" && parts[4] != "":
		r.Topic = parts[4]
	default:
		return nil, errInvalidToken("invalid message id")
	}
	r.UAID, r.ChannelID, r.ID = parts[1], parts[2], parts[3]
	if _, err := hex.DecodeString(r.UAID); err != nil || len(r.UAID) != 32 || r.ID == "" {
		return nil, errInvalidToken("invalid message id")
	}
	if _, ok := parseUUID(r.ChannelID); !ok {
		return nil, errInvalidToken("invalid message id")
	}
	return r, nil
}

// InternalToken is the bearer token nodes present to each other's internal
// listener at now: "<unix seconds>.<HMAC-SHA256 of them>" under the MAC
// key of the first (current) push key. It is bound to its time, so a
// token seen on the wire is worthless after InternalTokenWindow.
func (k *Keys) InternalToken(now time.Time) string {
	ts := strconv.FormatInt(now.Unix(), 10)
	return ts + "." + base64.RawURLEncoding.EncodeToString(internalMAC(k.internal[0], ts))
}

// CheckInternalToken reports whether tok is an InternalToken made within
// InternalTokenWindow of now under one of the configured keys: a node
// still on the previous first key keeps talking during a rolling key
// rotation, and a key removed from the configuration is refused.
func (k *Keys) CheckInternalToken(tok string, now time.Time) bool {
	ts, mac, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts != strconv.FormatInt(sec, 10) {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > InternalTokenWindow || d < -InternalTokenWindow {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil {
		return false
	}
	match := 0
	for _, key := range k.internal {
		match |= subtle.ConstantTimeCompare(internalMAC(key, ts), got)
	}
	return match == 1
}

func internalMAC(key []byte, ts string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(ts))
	return mac.Sum(nil)
}

func (k *Keys) encrypt(msg []byte) (string, error) {
	return k.seal.seal(msg, time.Now())
}

// maxTokenLen bounds what is decoded: the longest token herald makes is a
// message id of about 250 characters.
const maxTokenLen = 1024

// decrypt verifies and decrypts a token with any key (no age limit: an
// endpoint lives as long as its subscription); nil on any failure.
func (k *Keys) decrypt(tok string) []byte {
	if tok == "" || len(tok) > maxTokenLen {
		return nil
	}
	// Fernet tokens are padded URL-safe base64; autopush strips the
	// padding, so put it back. Refuse anything else before decoding.
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return nil
		}
	}
	if len(tok)%4 == 1 {
		return nil
	}
	if r := len(tok) % 4; r != 0 {
		tok += strings.Repeat("=", 4-r)
	}
	return fernet.VerifyAndDecrypt([]byte(tok), 0, k.keys)
}

// parseUUID reads a lower- or upper-case dashed UUID.
func parseUUID(s string) ([16]byte, bool) {
	var out [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return out, false
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	b, err := hex.DecodeString(h)
	if err != nil {
		return out, false
	}
	copy(out[:], b)
	return out, true
}

// formatUUID writes 16 bytes as a lower-case dashed UUID.
func formatUUID(b []byte) string {
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
