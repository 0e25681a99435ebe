package push

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxVAPIDExpiry is how far ahead a VAPID JWT's exp may be (RFC 8292 §2).
const MaxVAPIDExpiry = 24 * time.Hour

// maxAuthorizationLen bounds the Authorization header parsed: a VAPID JWT
// with a 65-byte key is under 500 characters.
const maxAuthorizationLen = 4096

// VAPID is a verified VAPID identification.
type VAPID struct {
	// PublicKey is the 65-byte uncompressed P-256 key of k= (or of
	// Crypto-Key p256ecdsa= for the legacy schemes).
	PublicKey []byte
	Subject   string // sub claim, "" when absent
	Expires   time.Time
}

func vapidError(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Errno: ErrnoVAPID, Message: "VAPID: " + msg}
}

// ParseVAPID reads the Authorization header of a send request (and
// Crypto-Key for the legacy "WebPush <jwt>" / "Bearer <jwt>" schemes) and
// verifies it: ES256 signature with the given key, aud equal to audience
// (the endpoint's origin, scheme://host[:port]), exp present, not past and
// at most MaxVAPIDExpiry after now. It returns nil, nil when the request
// carries no Authorization header. Every failure is a *Error 401 errno 109.
func ParseVAPID(h http.Header, audience string, now time.Time) (*VAPID, error) {
	tok, key, err := vapidHeader(h)
	if tok == "" || err != nil {
		return nil, err
	}
	return verifyVAPID(tok, key, audience, now)
}

// vapidHeader reads the token and public key of a send request's
// Authorization (and Crypto-Key) header: "", "", nil when there is none.
func vapidHeader(h http.Header) (tok, key string, err error) {
	auth := strings.TrimSpace(h.Get("Authorization"))
	if auth == "" {
		return "", "", nil
	}
	if len(auth) > maxAuthorizationLen {
		return "", "", vapidError("Authorization header too long")
	}
	scheme, rest, _ := strings.Cut(auth, " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(scheme) {
	case "vapid":
		for more := true; more; {
			var p string
			p, rest, more = strings.Cut(rest, ",")
			name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "t":
				tok = strings.TrimSpace(value)
			case "k":
				key = strings.Trim(strings.TrimSpace(value), `"`)
			}
		}
	case "webpush", "bearer":
		tok = rest
		for _, p := range params(h.Get("Crypto-Key")) {
			if p[0] == "p256ecdsa" {
				key = p[1]
			}
		}
	default:
		return "", "", vapidError("unknown Authorization scheme (want vapid t=…, k=…)")
	}
	if tok == "" {
		return "", "", vapidError("no token")
	}
	if key == "" {
		return "", "", vapidError("no public key (k=, or Crypto-Key p256ecdsa=)")
	}
	return tok, key, nil
}

// verifyVAPID verifies tok with key for audience at now (ParseVAPID).
func verifyVAPID(tok, key, audience string, now time.Time) (*VAPID, error) {
	raw, err := decodeKey(key)
	if err != nil {
		return nil, vapidError("the public key is not base64")
	}
	ecdsaKey, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		return nil, vapidError("the public key is not an uncompressed P-256 point")
	}
	claims := jwt.MapClaims{}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"ES256"}), jwt.WithoutClaimsValidation())
	if _, err := parser.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return ecdsaKey, nil }); err != nil {
		if errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			return nil, vapidError("bad signature")
		}
		return nil, vapidError("malformed token or not ES256")
	}
	aud, ok := claims["aud"].(string)
	if !ok || aud == "" {
		return nil, vapidError("aud claim missing")
	}
	if aud != audience {
		return nil, vapidError("aud must be " + audience)
	}
	expF, ok := claims["exp"].(float64)
	if !ok {
		return nil, vapidError("exp claim missing or not a number")
	}
	if expF > float64(now.Add(MaxVAPIDExpiry).Unix()) {
		return nil, vapidError("exp is more than 24 hours ahead")
	}
	exp := time.Unix(int64(expF), 0)
	if !exp.After(now) {
		return nil, vapidError("token expired")
	}
	v := &VAPID{PublicKey: raw, Expires: exp}
	if sub, ok := claims["sub"].(string); ok {
		v.Subject = sub
	}
	return v, nil
}

// decodeKey reads base64url or standard base64, padded or not (autopush
// is lenient with senders here).
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	s = strings.NewReplacer("+", "-", "/", "_").Replace(s)
	return base64.RawURLEncoding.DecodeString(s)
}
