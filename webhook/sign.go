package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks header names. They are lowercase because the spec
// lowercased them for HTTP/2 (on HTTP/1.1 Go sends them canonicalized, which
// receivers match case-insensitively).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every symmetric Standard Webhooks secret.
const SecretPrefix = "whsec_"

// Secret length bounds, in decoded bytes, from the Standard Webhooks spec.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
	// newSecretBytes is what NewSecret generates: the HMAC-SHA256 block is
	// 64 bytes, and 32 random bytes already give the full 256-bit strength.
	newSecretBytes = 32
)

// DefaultTolerance is the timestamp window Verify applies when given none.
// Every official Standard Webhooks library uses ±5 minutes.
const DefaultTolerance = 5 * time.Minute

// Errors returned by the signing functions; test with errors.Is.
var (
	// ErrInvalidSecret: the secret is empty, not base64, or (ValidSecret only)
	// outside 24–64 decoded bytes.
	ErrInvalidSecret = errors.New("invalid webhook secret")
	// ErrNoSecret: a signature was asked for with no secret to sign with.
	ErrNoSecret = errors.New("no webhook secret")
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature
	// is absent.
	ErrMissingHeaders = errors.New("missing webhook headers")
	// ErrInvalidTimestamp: webhook-timestamp is not integer Unix seconds.
	ErrInvalidTimestamp = errors.New("invalid webhook-timestamp")
	// ErrTimestampTooOld and ErrTimestampTooNew: webhook-timestamp is
	// outside the tolerance (replay protection).
	ErrTimestampTooOld = errors.New("webhook-timestamp too old")
	ErrTimestampTooNew = errors.New("webhook-timestamp too new")
	// ErrNoMatchingSignature: no v1 entry matches any of the secrets.
	ErrNoMatchingSignature = errors.New("no matching webhook signature")
)

// decodeSecret returns the HMAC key of a "whsec_" + base64 secret. The prefix
// is optional, and unpadded base64 is accepted as the official Python library
// does. The secret itself never appears in an error.
func decodeSecret(secret string) ([]byte, error) {
	s := strings.TrimPrefix(secret, SecretPrefix)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSecret)
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: not base64", ErrInvalidSecret)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSecret)
	}
	return key, nil
}

// NewSecret returns a fresh "whsec_" secret holding 32 random bytes.
func NewSecret() string {
	var b [newSecretBytes]byte
	// crypto/rand.Read never returns an error (it crashes the program
	// irrecoverably instead), so there is nothing to handle.
	_, _ = rand.Read(b[:])
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// ValidSecret reports whether s is a usable secret: base64 (after an optional
// "whsec_" prefix) of 24 to 64 bytes, the range the spec allows. The API
// calls it when a user supplies a secret; Sign is more lenient so that a
// secret stored before a rule change still signs.
func ValidSecret(s string) error {
	key, err := decodeSecret(s)
	if err != nil {
		return err
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return fmt.Errorf("%w: %d bytes, want %d to %d", ErrInvalidSecret, len(key), MinSecretBytes, MaxSecretBytes)
	}
	return nil
}

// mac computes the raw HMAC-SHA256 of "msgID.unixSeconds.body" without
// copying body into a joined buffer.
func mac(key []byte, msgID string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	var buf [24]byte
	h.Write([]byte(msgID))
	h.Write(strconv.AppendInt(append(buf[:0], '.'), unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// appendSignature appends "v1,<base64 HMAC>" to dst.
func appendSignature(dst, key []byte, msgID string, unix int64, body []byte) []byte {
	dst = append(dst, "v1,"...)
	return base64.StdEncoding.AppendEncode(dst, mac(key, msgID, unix, body))
}

// Sign returns the Standard Webhooks v1 signature of one message:
// "v1," + base64(HMAC-SHA256(key, msgID + "." + unix seconds + "." + body)),
// where key is the base64-decoded secret. Only the whole seconds of ts are
// signed, as they are what webhook-timestamp carries.
func Sign(secret, msgID string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", err
	}
	return string(appendSignature(nil, key, msgID, ts.Unix(), body)), nil
}

// SignatureHeader returns the webhook-signature value for a message signed
// with every secret, space-separated in the order given. During rotation a
// subscription has several active secrets; the receiver accepts the message
// if any entry matches the secret it knows, so old and new secrets overlap
// without downtime.
func SignatureHeader(secrets []string, msgID string, ts time.Time, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", ErrNoSecret
	}
	// 3 ("v1,") + 44 (base64 of 32 bytes) + 1 separator per entry.
	out := make([]byte, 0, 48*len(secrets))
	unix := ts.Unix()
	for i, s := range secrets {
		key, err := decodeSecret(s)
		if err != nil {
			return "", fmt.Errorf("secret %d: %w", i, err)
		}
		if i > 0 {
			out = append(out, ' ')
		}
		out = appendSignature(out, key, msgID, unix, body)
	}
	return string(out), nil
}

// Verify checks a received message the way a Standard Webhooks receiver does:
// the three headers are present, webhook-timestamp is within tolerance of now
// (tolerance <= 0 means DefaultTolerance), and at least one "v1," entry of
// webhook-signature matches one of secrets (compared in constant time;
// entries of other versions are ignored). herald itself only signs; Verify
// exists for its tests and documentation examples.
func Verify(secrets []string, headers http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	msgID := headers.Get(HeaderID)
	tsValue := headers.Get(HeaderTimestamp)
	sigValue := headers.Get(HeaderSignature)
	if msgID == "" || tsValue == "" || sigValue == "" {
		return ErrMissingHeaders
	}
	unix, err := strconv.ParseInt(tsValue, 10, 64)
	if err != nil {
		return ErrInvalidTimestamp
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts := time.Unix(unix, 0)
	if now.Sub(ts) > tolerance {
		return ErrTimestampTooOld
	}
	if ts.Sub(now) > tolerance {
		return ErrTimestampTooNew
	}
	if len(secrets) == 0 {
		return ErrNoSecret
	}
	expected := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		key, err := decodeSecret(s)
		if err != nil {
			return fmt.Errorf("secret %d: %w", i, err)
		}
		expected = append(expected, mac(key, msgID, unix, body))
	}
	for entry := range strings.FieldsSeq(sigValue) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		for _, want := range expected {
			if hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}
