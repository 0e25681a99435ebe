package push

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
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
	// maxCryptoHeaderLen bounds Encryption and Crypto-Key (legacy aesgcm):
	// a dh key is 87 characters; these headers are a few hundred at most.
	maxCryptoHeaderLen = 1024
)

// SendHeaders are the validated headers of a send request.
type SendHeaders struct {
	TTL   int    // seconds, capped at MaxTTL
	Topic string // "" when absent
	// Crypto are the headers forwarded to the user agent with a body
	// (encoding, and for aesgcm encryption and crypto_key stripped of
	// quotes and base64 padding); nil for an empty body.
	Crypto map[string]string
}

func badRequest(errno int, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Errno: errno, Message: msg}
}

// ParseSendHeaders validates TTL (required: 400 errno 111; negative or
// malformed: 400 errno 114), Topic (400 errno 113) and, when hasBody, the
// crypto headers (400 errno 110). Urgency is accepted and ignored: it is
// never forwarded to the user agent (RFC 8030 §5.3), and herald keeps no
// per-user-agent urgency threshold. Errors are *Error.
func ParseSendHeaders(h http.Header, hasBody bool) (*SendHeaders, error) {
	out := &SendHeaders{}
	ttls := h.Values("TTL")
	if len(ttls) == 0 {
		return nil, badRequest(ErrnoMissingTTL, "the TTL header is required")
	}
	ttl, err := parseTTL(ttls[0])
	if err != nil || len(ttls) > 1 {
		return nil, badRequest(ErrnoInvalidTTL, "TTL must be one non-negative integer of seconds")
	}
	out.TTL = ttl
	if topics := h.Values("Topic"); len(topics) > 0 {
		if len(topics) > 1 || !validTopic(topics[0]) {
			return nil, badRequest(ErrnoInvalidTopic, "Topic must be 1 to 32 characters of the URL-safe base64 alphabet")
		}
		out.Topic = topics[0]
	}
	if !hasBody {
		return out, nil
	}
	enc := strings.ToLower(strings.TrimSpace(h.Get("Content-Encoding")))
	encryption := h.Get("Encryption")
	cryptoKey := h.Get("Crypto-Key")
	if len(encryption) > maxCryptoHeaderLen || len(cryptoKey) > maxCryptoHeaderLen {
		return nil, badRequest(ErrnoInvalidCrypto, "Encryption or Crypto-Key header too long")
	}
	switch enc {
	case "aes128gcm":
		// RFC 8291 carries salt and key in the body: the legacy headers
		// must not be there too.
		if hasParam(encryption, "salt") {
			return nil, badRequest(ErrnoInvalidCrypto, "aes128gcm must not carry Encryption salt")
		}
		if hasParam(cryptoKey, "dh") {
			return nil, badRequest(ErrnoInvalidCrypto, "aes128gcm must not carry Crypto-Key dh")
		}
		out.Crypto = map[string]string{"encoding": "aes128gcm"}
	case "aesgcm":
		if !hasParam(encryption, "salt") {
			return nil, badRequest(ErrnoInvalidCrypto, "aesgcm requires an Encryption header with salt")
		}
		if cryptoKey != "" && !hasParam(cryptoKey, "dh") {
			return nil, badRequest(ErrnoInvalidCrypto, "aesgcm Crypto-Key requires dh")
		}
		out.Crypto = map[string]string{"encoding": "aesgcm", "encryption": stripParams(encryption, "")}
		if ck := stripParams(cryptoKey, "p256ecdsa"); ck != "" {
			out.Crypto["crypto_key"] = ck
		}
	case "":
		return nil, badRequest(ErrnoInvalidCrypto, "a body requires Content-Encoding aes128gcm (or legacy aesgcm)")
	default:
		return nil, badRequest(ErrnoInvalidCrypto, "unsupported Content-Encoding; use aes128gcm")
	}
	return out, nil
}

// parseTTL reads delta-seconds; values beyond 2^31 count as 2^31 (RFC 8030
// §5.2) and everything is capped at MaxTTL.
func parseTTL(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not digits")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		n = math.MaxInt32 // overflow
	}
	return int(min(n, MaxTTL)), nil
}

func validTopic(t string) bool {
	if t == "" || len(t) > MaxTopicLen {
		return false
	}
	i := 0
	for ; i < len(t); i++ {
		c := t[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(t); i++ {
		if t[i] != '=' {
			return false
		}
	}
	return true
}

// params splits a header of ;-separated name=value params (and ,-separated
// entries) into name/value pairs, values unquoted.
func params(h string) [][2]string {
	var out [][2]string
	for _, entry := range strings.Split(h, ",") {
		for _, p := range strings.Split(entry, ";") {
			name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "" {
				continue
			}
			out = append(out, [2]string{name, strings.Trim(strings.TrimSpace(value), `"`)})
		}
	}
	return out
}

func hasParam(h, name string) bool {
	if h == "" {
		return false
	}
	for _, p := range params(h) {
		if p[0] == name && p[1] != "" {
			return true
		}
	}
	return false
}

// stripParams rewrites a legacy crypto header as autopush forwards it:
// quotes and trailing base64 padding removed from every value, params
// joined with ';', and the param named drop (the VAPID key) left out.
func stripParams(h, drop string) string {
	var parts []string
	for _, p := range params(h) {
		if p[0] == drop {
			continue
		}
		parts = append(parts, p[0]+"="+strings.TrimRight(p[1], "="))
	}
	return strings.Join(parts, ";")
}
