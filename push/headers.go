package push

import (
	"errors"
	"net/http"
)

// Limits of a send request.
const (
	// MaxTTL caps a message's TTL (30 days); larger values are shortened
	// and the effective value is echoed in the TTL response header.
	MaxTTL = 30 * 24 * 3600
	// MaxBodyBytes is the largest accepted request body: autopush-rs's
	// 5,630 (RFC 8030 forbids 413 at or below 4,096; senders that
	// base64-encode need more). Larger is 413 errno 104.
	MaxBodyBytes = 5630
	// MaxTopicLen is the longest Topic (RFC 8030 §5.4).
	MaxTopicLen = 32
)

var errNotImplemented = errors.New("push: not implemented")

// SendHeaders are the validated headers of a send request.
type SendHeaders struct {
	TTL   int    // seconds, capped at MaxTTL
	Topic string // "" when absent
	// Crypto are the headers forwarded to the user agent with a body
	// (encoding, and for aesgcm encryption and crypto_key stripped of
	// quotes and base64 padding); nil for an empty body.
	Crypto map[string]string
}

// ParseSendHeaders validates TTL (required: 400 errno 111; negative or
// malformed: 400 errno 114), Topic (400 errno 113) and, when hasBody, the
// crypto headers (400 errno 110). Errors are *Error.
func ParseSendHeaders(h http.Header, hasBody bool) (*SendHeaders, error) {
	return nil, errNotImplemented
}
