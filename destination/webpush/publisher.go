package webpushdest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/webhook"
)

// Defaults of a push message (RFC 8030), the API's.
const (
	// DefaultTTL is the TTL header when the destination sets none: how
	// long the push service keeps a message for a browser that is away.
	DefaultTTL = herald.DefaultPushTTLS
	// DefaultUrgency is the Urgency header when the destination sets none.
	DefaultUrgency = herald.DefaultPushUrgency
	// MaxTopicLen is the longest Topic RFC 8030 §5.4 allows.
	MaxTopicLen = herald.MaxPushTopicLen
)

// KeySource gives the VAPID key to sign with.
type KeySource interface {
	VAPIDKey(ctx context.Context) (*VAPIDKey, error)
}

// Config configures a Publisher.
type Config struct {
	// Sender carries the requests: its guarded client, pool and timeout
	// handling (required).
	Sender *webhook.Sender
	// Keys gives the VAPID key (required).
	Keys KeySource
	// Subject is the JWT's sub, a mailto: or https: contact the push
	// service may use (--vapid-subject; default DefaultSubject).
	Subject string
	// AllowHTTP accepts http:// endpoints (--dev: a push service on
	// loopback); otherwise an endpoint must be https.
	AllowHTTP bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Publisher sends webpush destinations. It is safe for concurrent use.
type Publisher struct {
	cfg    Config
	jwts   jwtCache
	closed atomic.Bool
}

var _ destination.Publisher = (*Publisher)(nil)

// New returns a Publisher.
func New(cfg Config) *Publisher {
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Publisher{cfg: cfg}
}

// Close makes later Sends fail. The Sender is shared and not closed here.
func (p *Publisher) Close() { p.closed.Store(true) }

// Send makes one attempt: see the package comment for what each answer
// means.
func (p *Publisher) Send(ctx context.Context, r *webhook.Request) webhook.Result {
	start := time.Now()
	res := p.send(ctx, r)
	res.Duration = time.Since(start)
	res.Message = herald.CleanLine(res.Message, 256)
	return res
}

// invalid is a request that can never be sent: dead at once.
func invalid(format string, args ...any) webhook.Result {
	return webhook.Result{Class: herald.ErrorInvalidRequest, Message: fmt.Sprintf(format, args...), Permanent: true}
}

func (p *Publisher) send(ctx context.Context, r *webhook.Request) webhook.Result {
	if p.closed.Load() {
		return webhook.Result{Class: herald.ErrorConnection, Message: "webpush publisher closed"}
	}
	d := r.Destination
	if _, err := Check(d, p.cfg.AllowHTTP); err != nil {
		return invalid("%s", err.Error())
	}
	keys, err := ParseKeys(d.Subscription.Keys.P256DH, d.Subscription.Keys.Auth)
	if err != nil {
		return invalid("%s", err.Error())
	}
	origin, err := Origin(d.Subscription.Endpoint)
	if err != nil {
		return invalid("%s", err.Error())
	}
	urgency := cmp.Or(d.Urgency, DefaultUrgency)
	ttl := DefaultTTL
	if d.TTLS != nil {
		ttl = *d.TTLS
	}
	topic := cmp.Or(d.Topic, TopicOf(r.EventKey))

	body, err := Encrypt(keys, r.Body)
	if errors.Is(err, ErrTooLarge) {
		return webhook.Result{Class: herald.ErrorPayloadTooLarge, Permanent: true, Message: err.Error()}
	}
	if err != nil {
		return invalid("cannot encrypt: %s", err.Error())
	}
	vk, err := p.cfg.Keys.VAPIDKey(ctx)
	if err != nil {
		// Retried: an operator can restore the key (--encryption-key).
		return webhook.Result{Class: herald.ErrorSecretUnreadable, Message: "no VAPID key: " + err.Error()}
	}
	jwt, err := p.jwts.get(vk, origin, p.cfg.Subject, p.cfg.Now())
	if err != nil {
		return webhook.Result{Class: herald.ErrorInvalidRequest, Message: "cannot sign the VAPID JWT: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Subscription.Endpoint, bytes.NewReader(body))
	if err != nil {
		return invalid("subscription.endpoint is not a valid URL")
	}
	h := req.Header
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Encoding", "aes128gcm")
	h.Set("TTL", strconv.Itoa(ttl))
	h.Set("Urgency", urgency)
	if topic != "" {
		h.Set("Topic", topic)
	}
	h.Set("Authorization", "vapid t="+jwt+", k="+vk.Public)

	res, _ := p.cfg.Sender.Do(ctx, req, r.Timeout)
	if res.Success || res.Status == 0 || res.Class != "" {
		return res
	}
	classify(&res)
	return res
}

// classify names a push service's non-2xx answer.
func classify(res *webhook.Result) {
	code := res.Status
	text := webhook.StatusText(code)
	said := ""
	if res.Excerpt != "" {
		said = ": " + herald.CleanLine(res.Excerpt, 160)
	}
	switch code {
	case http.StatusNotFound, http.StatusGone:
		res.Class = herald.ErrorGone
		res.Message = text + ": the push subscription expired or was unsubscribed" + said
	case http.StatusRequestEntityTooLarge:
		res.Class, res.Permanent = herald.ErrorPayloadTooLarge, true
		res.Message = text + ": the push service refused the message's size" + said
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		res.Class, res.Permanent = herald.ErrorRejected, true
		res.Message = text + ": the push service refused the message" + said
	default:
		res.Class = herald.ErrorHTTPStatus
		res.Message = text + said
	}
}

// Check validates a webpush destination by the API's rules
// (herald.ValidatePushSubscription and the limits beside it), as the API
// does when a subscription is created and Send does before every attempt
// (a bad one is dead at once as invalid_request). field is the offending
// field's path under destination ("subscription.keys.p256dh",
// "urgency", …); allowHTTP accepts http:// endpoints (--dev).
func Check(d herald.Destination, allowHTTP bool) (field string, err error) {
	if err := herald.ValidatePushSubscription(d.Subscription, allowHTTP); err != nil {
		field := "subscription"
		var he *herald.Error
		if errors.As(err, &he) {
			if he.Field != "" {
				field += "." + he.Field
			}
			return field, fmt.Errorf("%s %s", field, he.Message)
		}
		return field, fmt.Errorf("%s: %w", field, err)
	}
	if d.Urgency != "" && !ValidUrgency(d.Urgency) {
		return "urgency", errors.New("urgency must be very-low, low, normal or high")
	}
	if d.TTLS != nil && (*d.TTLS < 0 || *d.TTLS > herald.MaxPushTTLS) {
		return "ttl_s", fmt.Errorf("ttl_s must be from 0 to %d (28 days)", herald.MaxPushTTLS)
	}
	if d.Topic != "" && !ValidTopic(d.Topic) {
		return "topic", errors.New("topic must be at most 32 characters of A-Z a-z 0-9 - _")
	}
	return "", nil
}

// ValidUrgency reports whether u is an RFC 8030 §5.3 urgency.
func ValidUrgency(u string) bool { return slices.Contains(herald.PushUrgencies, u) }

// ValidTopic reports whether t is an RFC 8030 §5.4 topic: 1 to 32
// characters of the base64url alphabet.
func ValidTopic(t string) bool { return t != "" && herald.CheckPushTopic(t) == nil }

// TopicOf is the default Topic of an event key: the first 32 characters
// of the base64url SHA-256 of the key (an event key is free text, a topic
// is not), so a newer event of a key replaces an undelivered one at the
// push service, as "latest" ordering does in herald. "" (no key, no
// Topic) for an event without one.
func TopicOf(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(sum[:])[:MaxTopicLen]
}
