package push

import (
	"net/http"
	"time"
)

// MaxVAPIDExpiry is how far ahead a VAPID JWT's exp may be (RFC 8292 §2).
const MaxVAPIDExpiry = 24 * time.Hour

// VAPID is a verified VAPID identification.
type VAPID struct {
	// PublicKey is the 65-byte uncompressed P-256 key of k= (or of
	// Crypto-Key p256ecdsa= for the legacy schemes).
	PublicKey []byte
	Subject   string // sub claim, "" when absent
	Expires   time.Time
}

// ParseVAPID reads the Authorization header of a send request (and
// Crypto-Key for the legacy "WebPush <jwt>" / "Bearer <jwt>" schemes) and
// verifies it: ES256 signature with the given key, aud equal to audience
// (the endpoint's origin, scheme://host[:port]), exp present, not past and
// at most MaxVAPIDExpiry after now. It returns nil, nil when the request
// carries no Authorization header. Every failure is a *Error 401 errno 109.
func ParseVAPID(h http.Header, audience string, now time.Time) (*VAPID, error) {
	return nil, errNotImplemented
}
