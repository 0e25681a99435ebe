package webpushdest

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"
)

// VAPID (RFC 8292) defaults and limits.
const (
	// JWTLifetime is the exp of the JWTs herald signs: RFC 8292 allows
	// at most 24 hours; 12 leaves room for a push service's clock skew.
	JWTLifetime = 12 * time.Hour
	// jwtRenew is how long before exp a cached JWT is replaced, so one
	// never expires in flight or on a service whose clock runs ahead.
	jwtRenew = time.Hour
	// DefaultSubject is the sub claim when none is configured
	// (--vapid-subject).
	DefaultSubject = "mailto:admin@localhost"
)

// VAPIDKey is herald's application server key pair (one per
// installation): the ES256 key that signs the JWTs, whose public half is
// the applicationServerKey browsers subscribe with.
type VAPIDKey struct {
	priv *ecdsa.PrivateKey
	// Public is the uncompressed public point, base64url without padding:
	// the k= of the Authorization header and the page's
	// applicationServerKey.
	Public string
}

// GenerateVAPIDKey returns a new key pair as stored: the private scalar
// (32 bytes) and the public point (65 bytes), both base64url without
// padding (the format of web-push libraries' VAPID keys).
func GenerateVAPIDKey() (private, public string, err error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	return base64.RawURLEncoding.EncodeToString(k.Bytes()), base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), nil
}

// ParseVAPIDKey reads a key pair in GenerateVAPIDKey's format and checks
// that the halves belong together.
func ParseVAPIDKey(private, public string) (*VAPIDKey, error) {
	raw, err := decodeB64(private)
	if err != nil {
		return nil, errors.New("VAPID private key is not base64url")
	}
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), raw)
	if err != nil {
		return nil, fmt.Errorf("VAPID private key: %w", err)
	}
	pub, err := priv.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	enc := base64.RawURLEncoding.EncodeToString(pub)
	if public != "" && public != enc {
		return nil, errors.New("VAPID public key does not match the private key")
	}
	return &VAPIDKey{priv: priv, Public: enc}, nil
}

// Origin is the aud of a push resource URL: scheme://host[:port].
func Origin(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", errors.New("subscription.endpoint is not an absolute URL")
	}
	return u.Scheme + "://" + u.Host, nil
}

// SignJWT returns an ES256 JWT with aud, exp and sub (RFC 8292 §2).
func (k *VAPIDKey) SignJWT(aud, sub string, exp time.Time) (string, error) {
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))
	claims, err := json.Marshal(struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}{aud, exp.Unix(), sub})
	if err != nil {
		return "", err
	}
	signing := header + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, digest[:])
	if err != nil {
		return "", err
	}
	// JWS ES256: r ‖ s, each 32 bytes big-endian (RFC 7518 §3.4), not DER.
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// jwtCache keeps one JWT per (key, origin) until jwtRenew before its exp:
// signing is the costliest step of a send after the ECDH, and a push
// service sees the same token for hours, as RFC 8292 §2 allows.
type jwtCache struct {
	mu      sync.Mutex
	entries map[jwtCacheKey]cachedJWT
}

type jwtCacheKey struct{ key, origin, sub string }

type cachedJWT struct {
	token string
	exp   time.Time
}

// maxCachedJWTs bounds the cache: push services are few (one origin
// each), but endpoints come from subscribers, so the map is reset rather
// than grown without end.
const maxCachedJWTs = 4096

func (c *jwtCache) get(k *VAPIDKey, origin, sub string, now time.Time) (string, error) {
	ck := jwtCacheKey{k.Public, origin, sub}
	c.mu.Lock()
	e, ok := c.entries[ck]
	c.mu.Unlock()
	if ok && now.Before(e.exp.Add(-jwtRenew)) {
		return e.token, nil
	}
	exp := now.Add(JWTLifetime)
	tok, err := k.SignJWT(origin, sub, exp)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxCachedJWTs {
		c.entries = map[jwtCacheKey]cachedJWT{}
	}
	c.entries[ck] = cachedJWT{tok, exp}
	c.mu.Unlock()
	return tok, nil
}
