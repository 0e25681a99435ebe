package push

import "time"

// Keys are the Fernet keys of --push-crypto-keys: the first encrypts, all
// decrypt (key rotation, as autopush's MultiFernet).
type Keys struct {
}

// ParseKeys reads --push-crypto-keys: one or more Fernet keys (32 bytes,
// URL-safe base64), separated by commas, optionally in brackets as
// autopush writes them ("[k1,k2]").
func ParseKeys(s string) (*Keys, error) { return nil, errNotImplemented }

// GenerateKey returns a new random Fernet key in the form ParseKeys reads.
func GenerateKey() string { return "" }

// Endpoint is what an endpoint token carries.
type Endpoint struct {
	UAID      string // 32 lower-case hex digits
	ChannelID string // lower-case dashed UUID
	// KeyHash is the SHA-256 of the application server key (v2 tokens),
	// nil for v1.
	KeyHash []byte
}

// EndpointToken encrypts e: a v1 token (uaid‖chid, 140 characters) when
// e.KeyHash is nil, else v2 (uaid‖chid‖hash, 183 characters). Trailing '='
// are stripped.
func (k *Keys) EndpointToken(e *Endpoint) (string, error) { return "", errNotImplemented }

// ParseEndpointToken decrypts a token of API version 1 or 2 (the path's
// /v1/ or /v2/; /wpush/{token} is 1). Any failure (bad base64, bad
// signature, wrong length for the version) is a *Error 404 errno 102.
func (k *Keys) ParseEndpointToken(token string, version int) (*Endpoint, error) {
	return nil, errNotImplemented
}

// MessageRef locates a stored message: the /m/{id} path and the version
// sent to the user agent are Fernet-encrypted MessageRefs.
type MessageRef struct {
	UAID      string
	ChannelID string
	ID        string // store.PushMessage.ID
	Topic     string // "" without a topic
}

// MessageID encrypts r.
func (k *Keys) MessageID(r *MessageRef) (string, error) { return "", errNotImplemented }

// ParseMessageID decrypts a message id; any failure is a *Error 404
// errno 102.
func (k *Keys) ParseMessageID(s string) (*MessageRef, error) { return nil, errNotImplemented }

// InternalToken is the bearer token nodes present to each other's internal
// listener: an HMAC of a fixed label under the first key. CheckInternalToken
// accepts the token of any configured key, so a rolling key rotation keeps
// nodes talking.
func (k *Keys) InternalToken() string { return "" }

// CheckInternalToken reports whether tok is the InternalToken of one of the
// keys (constant-time).
func (k *Keys) CheckInternalToken(tok string) bool { return false }

var _ = time.Now
