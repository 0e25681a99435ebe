package herald

import (
	"crypto/ecdh"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Checks of destination and connection fields, shared by the API (which
// refuses a bad value at the door) and the senders (which must not trust
// a stored one blindly).

// Destination limits.
const (
	// MaxPushTTLS bounds Destination.TTLS: 28 days, the longest a push
	// service is asked to keep a message (RFC 8030 lets it keep less).
	MaxPushTTLS = 2419200
	// DefaultPushTTLS is Destination.TTLS when unset: one day.
	DefaultPushTTLS = 86400
	// DefaultPushUrgency is Destination.Urgency when unset.
	DefaultPushUrgency = "normal"
	// MaxPushEndpointBytes bounds a push subscription's endpoint, as
	// webhook URLs are bounded.
	MaxPushEndpointBytes = 2048
	// MaxPushTopicLen is RFC 8030's limit on the Topic header: 32
	// characters of the base64url alphabet.
	MaxPushTopicLen = 32
	// MaxAMQPNameBytes bounds an exchange and a routing key (AMQP 0-9-1
	// short strings).
	MaxAMQPNameBytes = 255
	// MaxBrokerNameBytes bounds a NATS subject, a Redis stream and an
	// MQTT topic: far above any sensible name, far below what the brokers
	// take (MQTT allows 65535 bytes).
	MaxBrokerNameBytes = 1024
	// MaxConnectionNameLen bounds a Connection's name.
	MaxConnectionNameLen = 64
	// MaxConnectionURLBytes bounds a Connection's URL.
	MaxConnectionURLBytes = 2048
)

// PushUrgencies are the values of Destination.Urgency (RFC 8030 5.3).
var PushUrgencies = []string{"very-low", "low", "normal", "high"}

// ValidatePushSubscription checks a browser's PushSubscription: the
// endpoint is an absolute https URL (http too when allowHTTP, for
// development against a local push service), keys.p256dh is the base64url
// of an uncompressed P-256 point on the curve (65 bytes) and keys.auth the
// base64url of 16 bytes (RFC 8291). Where the endpoint points is not
// checked here: the SSRF guard applies at dial time, after DNS, as for
// webhooks. The error is a *Error whose Field is the path inside the push
// subscription ("endpoint", "keys.p256dh", "keys.auth") and whose Message
// says what is wrong without repeating it.
func ValidatePushSubscription(ps *PushSubscription, allowHTTP bool) error {
	if ps == nil {
		return FieldErrorf(CodeMissingField, "", "is required")
	}
	if err := checkPushEndpoint(ps.Endpoint, allowHTTP); err != nil {
		return FieldErrorf(CodeInvalidField, "endpoint", "%s", err)
	}
	if ps.Keys.P256DH == "" {
		return FieldErrorf(CodeMissingField, "keys.p256dh", "is required")
	}
	if _, err := PushPublicKey(ps.Keys.P256DH); err != nil {
		return FieldErrorf(CodeInvalidField, "keys.p256dh", "%s", err)
	}
	if ps.Keys.Auth == "" {
		return FieldErrorf(CodeMissingField, "keys.auth", "is required")
	}
	if _, err := PushAuthSecret(ps.Keys.Auth); err != nil {
		return FieldErrorf(CodeInvalidField, "keys.auth", "%s", err)
	}
	return nil
}

func checkPushEndpoint(raw string, allowHTTP bool) error {
	if raw == "" {
		return errors.New("is required")
	}
	if len(raw) > MaxPushEndpointBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxPushEndpointBytes, len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("is not a valid URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	case u.Scheme == "http":
		return errors.New("must be an https URL (http only with herald serve --dev)")
	default:
		return errors.New("must be an absolute https URL")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return errors.New("must name a host (https://host/path)")
	}
	if u.User != nil {
		return errors.New("must not carry user information")
	}
	return nil
}

// PushPublicKey decodes a PushSubscription's keys.p256dh: base64url (with
// or without padding) of an uncompressed P-256 point on the curve.
func PushPublicKey(b64 string) (*ecdh.PublicKey, error) {
	b, err := decodeBase64URL(b64)
	if err != nil {
		return nil, errors.New("must be base64url")
	}
	if len(b) != 65 || b[0] != 4 {
		return nil, fmt.Errorf("must be an uncompressed P-256 point (65 bytes starting 0x04), got %d bytes", len(b))
	}
	k, err := ecdh.P256().NewPublicKey(b)
	if err != nil {
		return nil, errors.New("is not a point on the P-256 curve")
	}
	return k, nil
}

// PushAuthSecret decodes a PushSubscription's keys.auth: base64url of 16
// bytes.
func PushAuthSecret(b64 string) ([]byte, error) {
	b, err := decodeBase64URL(b64)
	if err != nil {
		return nil, errors.New("must be base64url")
	}
	if len(b) != 16 {
		return nil, fmt.Errorf("must be 16 bytes, got %d", len(b))
	}
	return b, nil
}

// decodeBase64URL accepts base64url with or without padding (browsers
// send it unpadded; some libraries pad).
func decodeBase64URL(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// CheckPushTopic checks a Web Push Topic (RFC 8030 5.4): at most 32
// characters of the base64url alphabet.
func CheckPushTopic(s string) error {
	if len(s) > MaxPushTopicLen {
		return fmt.Errorf("must be at most %d characters, got %d", MaxPushTopicLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		if !isBase64URLChar(s[i]) {
			return errors.New("must use only A-Z, a-z, 0-9, '-' and '_'")
		}
	}
	return nil
}

func isBase64URLChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// CheckAMQPExchange checks an exchange name ("" is the default exchange):
// at most 255 bytes of letters, digits, '-', '_', '.' and ':' (RabbitMQ's
// rule).
func CheckAMQPExchange(s string) error {
	if len(s) > MaxAMQPNameBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxAMQPNameBytes, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return errors.New("must use only A-Z, a-z, 0-9, '-', '_', '.' and ':'")
		}
	}
	return nil
}

// CheckAMQPRoutingKey checks a routing key: at most 255 bytes of UTF-8
// without control characters.
func CheckAMQPRoutingKey(s string) error {
	if len(s) > MaxAMQPNameBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxAMQPNameBytes, len(s))
	}
	return printable(s)
}

// CheckNATSSubject checks a subject to publish to: dot-separated non-empty
// tokens without whitespace, and no wildcard ('*' or '>' tokens are for
// subscribers).
func CheckNATSSubject(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > MaxBrokerNameBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxBrokerNameBytes, len(s))
	}
	if err := printable(s); err != nil {
		return err
	}
	for _, tok := range strings.Split(s, ".") {
		switch {
		case tok == "":
			return errors.New("must be dot-separated non-empty tokens (no leading, trailing or double dots)")
		case strings.ContainsAny(tok, " \t"):
			return errors.New("must not contain whitespace")
		case tok == "*" || tok == ">":
			return errors.New("must not contain wildcards ('*', '>'): a subject to publish to names one subject")
		}
	}
	return nil
}

// CheckRedisStream checks a stream key: not empty, at most
// MaxBrokerNameBytes, no control characters.
func CheckRedisStream(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > MaxBrokerNameBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxBrokerNameBytes, len(s))
	}
	return printable(s)
}

// CheckMQTTTopic checks a topic to publish to (MQTT 5, 4.7): not empty, no
// wildcards ('+', '#'), not a broker topic ('$' first, e.g. $SYS), no
// control characters.
func CheckMQTTTopic(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > MaxBrokerNameBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxBrokerNameBytes, len(s))
	}
	if strings.ContainsAny(s, "+#") {
		return errors.New("must not contain wildcards ('+', '#'): a topic to publish to names one topic")
	}
	if s[0] == '$' {
		return errors.New("must not start with '$' (topics the broker reserves, such as $SYS)")
	}
	return printable(s)
}

func printable(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("must be valid UTF-8")
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return errors.New("must not contain control characters")
		}
	}
	return nil
}

// ValidConnectionName reports whether s can name a Connection: 1 to 64
// characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or
// digit.
func ValidConnectionName(s string) bool {
	if s == "" || len(s) > MaxConnectionNameLen || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// ConnectionSchemes are the URL schemes a connection of type t may have,
// plain first: amqp/amqps, nats/tls, redis/rediss, mqtt/mqtts/tcp/ssl.
// Nil for a type that takes no connection.
func ConnectionSchemes(t DestinationType) []string {
	switch t {
	case DestinationAMQP:
		return []string{"amqp", "amqps"}
	case DestinationNATS:
		return []string{"nats", "tls"}
	case DestinationRedis:
		return []string{"redis", "rediss"}
	case DestinationMQTT:
		return []string{"mqtt", "mqtts", "tcp", "ssl"}
	}
	return nil
}

// CheckConnectionURL checks that raw is a URL a connection of type t can
// dial: a scheme of ConnectionSchemes(t) and a host.
func CheckConnectionURL(t DestinationType, raw string) error {
	if raw == "" {
		return errors.New("is required")
	}
	if len(raw) > MaxConnectionURLBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxConnectionURLBytes, len(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's message may quote the URL, password included.
		return errors.New("is not a valid URL")
	}
	schemes := ConnectionSchemes(t)
	if !slices.Contains(schemes, u.Scheme) {
		return fmt.Errorf("must be a %s URL for a %s connection", strings.Join(schemes, "://, ")+"://", t)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return fmt.Errorf("must name a host (%s://host:port)", schemes[0])
	}
	return nil
}
