package webpushdest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/push"
	"github.com/heraldhq/herald/webhook"
)

// staticKeys is a KeySource holding one key.
type staticKeys struct{ k *VAPIDKey }

func (s staticKeys) VAPIDKey(context.Context) (*VAPIDKey, error) { return s.k, nil }

func newVAPIDKey(t *testing.T) *VAPIDKey {
	t.Helper()
	priv, pub, err := GenerateVAPIDKey()
	require.NoError(t, err)
	k, err := ParseVAPIDKey(priv, pub)
	require.NoError(t, err)
	return k
}

// TestJWTVerifies: the token verifies with herald's own push service
// verifier (aud, exp ≤ 24 h, ES256 with k=) and with golang-jwt.
func TestJWTVerifies(t *testing.T) {
	t.Parallel()
	k := newVAPIDKey(t)
	now := time.Now()
	tok, err := k.SignJWT("https://push.example.test", "mailto:ops@example.test", now.Add(JWTLifetime))
	require.NoError(t, err)

	h := http.Header{}
	h.Set("Authorization", "vapid t="+tok+", k="+k.Public)
	v, err := push.ParseVAPID(h, "https://push.example.test", now)
	require.NoError(t, err)
	require.Equal(t, "mailto:ops@example.test", v.Subject)
	require.WithinDuration(t, now.Add(JWTLifetime), v.Expires, 2*time.Second)
	_, err = push.ParseVAPID(h, "https://other.example.test", now)
	require.Error(t, err, "aud is the endpoint's origin")

	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), b64(t, k.Public))
	require.NoError(t, err)
	claims := jwt.MapClaims{}
	_, err = jwt.NewParser(jwt.WithValidMethods([]string{"ES256"}), jwt.WithAudience("https://push.example.test")).
		ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return pub, nil })
	require.NoError(t, err)
	// Another key does not verify it.
	other := newVAPIDKey(t)
	opub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), b64(t, other.Public))
	require.NoError(t, err)
	_, err = jwt.NewParser().ParseWithClaims(tok, jwt.MapClaims{}, func(*jwt.Token) (any, error) { return opub, nil })
	require.Error(t, err)
}

func TestJWTCache(t *testing.T) {
	t.Parallel()
	k := newVAPIDKey(t)
	var c jwtCache
	now := time.Now()
	a, err := c.get(k, "https://a.test", "mailto:x@y", now)
	require.NoError(t, err)
	b, err := c.get(k, "https://a.test", "mailto:x@y", now.Add(10*time.Hour))
	require.NoError(t, err)
	require.Equal(t, a, b, "reused until an hour before exp")
	other, err := c.get(k, "https://b.test", "mailto:x@y", now)
	require.NoError(t, err)
	require.NotEqual(t, a, other, "one token per origin")
	renewed, err := c.get(k, "https://a.test", "mailto:x@y", now.Add(JWTLifetime-jwtRenew+time.Second))
	require.NoError(t, err)
	require.NotEqual(t, a, renewed, "renewed close to exp")
	rotated, err := c.get(newVAPIDKey(t), "https://a.test", "mailto:x@y", now)
	require.NoError(t, err)
	require.NotEqual(t, a, rotated, "a new key signs anew")
}

func TestTopic(t *testing.T) {
	t.Parallel()
	require.Empty(t, TopicOf(""))
	tp := TopicOf("order/42 ✓")
	require.Len(t, tp, MaxTopicLen)
	require.True(t, ValidTopic(tp))
	require.Equal(t, tp, TopicOf("order/42 ✓"))
	require.NotEqual(t, tp, TopicOf("order/43 ✓"))
	require.False(t, ValidTopic(strings.Repeat("a", 33)))
	require.False(t, ValidTopic("a b"))
	require.False(t, ValidTopic("a+b"))
}

// pushService is a test push service: it answers with the status its
// script gives and records each message, decrypted for ua.
type pushService struct {
	*httptest.Server
	ua     *userAgent
	vapid  *VAPIDKey
	status int
	header http.Header
	text   string

	mu  sync.Mutex
	got []received
}

type received struct {
	header http.Header
	body   []byte
	plain  []byte
	err    error
}

func newPushService(t *testing.T, vapid *VAPIDKey) *pushService {
	t.Helper()
	ps := &pushService{ua: newUserAgent(t), vapid: vapid, status: http.StatusCreated}
	ps.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		plain, err := decrypt(ps.ua.priv, ps.ua.auth, body)
		ps.mu.Lock()
		ps.got = append(ps.got, received{header: r.Header.Clone(), body: body, plain: plain, err: err})
		status, extra, text := ps.status, ps.header, ps.text
		ps.mu.Unlock()
		for k, v := range extra {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, text)
	}))
	t.Cleanup(ps.Close)
	return ps
}

func (ps *pushService) answer(status int, text string, header http.Header) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.status, ps.text, ps.header = status, text, header
}

func (ps *pushService) received() []received {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]received(nil), ps.got...)
}

func (ps *pushService) destination() herald.Destination {
	return herald.Destination{Type: herald.DestinationWebPush, Subscription: &herald.PushSubscription{
		Endpoint: ps.URL + "/wpush/v2/abc",
		Keys:     herald.PushKeys{P256DH: ps.ua.p256dh(), Auth: ps.ua.authB64()},
	}}
}

func request(d herald.Destination, body []byte) *webhook.Request {
	return &webhook.Request{Destination: d, Body: body, MsgID: "dlv_1", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		Attempt: 1, EventType: "order.paid", EventID: "evt_1", EventKey: "order-42", Timeout: 5 * time.Second}
}

func newTestPublisher(t *testing.T, vapid *VAPIDKey, dev bool) *Publisher {
	t.Helper()
	sender := webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: dev}})
	t.Cleanup(sender.Close)
	p := New(Config{Sender: sender, Keys: staticKeys{vapid}, Subject: "mailto:ops@example.test", AllowHTTP: true})
	t.Cleanup(p.Close)
	return p
}

// TestSendDelivers: the push service receives the webhook body, encrypted
// for the subscription, with VAPID for its origin and the RFC 8030
// headers.
func TestSendDelivers(t *testing.T) {
	t.Parallel()
	vapid := newVAPIDKey(t)
	ps := newPushService(t, vapid)
	p := newTestPublisher(t, vapid, true)
	body := []byte(`{"type":"order.paid","data":{"id":42}}`)

	res := p.Send(t.Context(), request(ps.destination(), body))
	require.True(t, res.Success, "%+v", res)
	require.Equal(t, http.StatusCreated, res.Status)
	got := ps.received()
	require.Len(t, got, 1)
	require.NoError(t, got[0].err)
	require.Equal(t, body, got[0].plain)
	require.Len(t, got[0].body, 86+len(body)+17, "no padding beyond the delimiter")
	h := got[0].header
	require.Equal(t, "aes128gcm", h.Get("Content-Encoding"))
	require.Equal(t, "application/octet-stream", h.Get("Content-Type"))
	require.Equal(t, "86400", h.Get("TTL"))
	require.Equal(t, "normal", h.Get("Urgency"))
	require.Equal(t, TopicOf("order-42"), h.Get("Topic"))
	v, err := push.ParseVAPID(h, ps.URL, time.Now())
	require.NoError(t, err)
	require.Equal(t, vapid.Public, b64url(v.PublicKey))
	require.Equal(t, "mailto:ops@example.test", v.Subject)
	require.True(t, v.Expires.Before(time.Now().Add(24*time.Hour)))

	// The destination's own urgency, TTL and topic; no key, no topic.
	d := ps.destination()
	ttl := 60
	d.TTLS, d.Urgency, d.Topic = &ttl, "high", "inbox"
	require.True(t, p.Send(t.Context(), request(d, body)).Success)
	d.Topic = ""
	r := request(d, body)
	r.EventKey = ""
	require.True(t, p.Send(t.Context(), r).Success)
	got = ps.received()
	require.Len(t, got, 3)
	require.Equal(t, "60", got[1].header.Get("TTL"))
	require.Equal(t, "high", got[1].header.Get("Urgency"))
	require.Equal(t, "inbox", got[1].header.Get("Topic"))
	require.Empty(t, got[2].header.Values("Topic"))
	// The JWT is reused for the origin.
	require.Equal(t, got[0].header.Get("Authorization"), got[1].header.Get("Authorization"))
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// TestSendAnswers: each answer of a push service, its class and whether
// it is permanent.
func TestSendAnswers(t *testing.T) {
	t.Parallel()
	vapid := newVAPIDKey(t)
	ps := newPushService(t, vapid)
	p := newTestPublisher(t, vapid, true)
	for _, tc := range []struct {
		status     int
		text       string
		header     http.Header
		class      herald.ErrorClass
		permanent  bool
		retryAfter time.Duration
	}{
		{status: 201, class: herald.ErrorNone},
		{status: 202, class: herald.ErrorNone},
		{status: 404, text: `{"errno":106}`, class: herald.ErrorGone},
		{status: 410, text: "unsubscribed", class: herald.ErrorGone},
		{status: 413, text: "too big", class: herald.ErrorPayloadTooLarge, permanent: true},
		{status: 429, header: http.Header{"Retry-After": {"120"}}, class: herald.ErrorHTTPStatus, retryAfter: 120 * time.Second},
		{status: 503, header: http.Header{"Retry-After": {"30"}}, class: herald.ErrorHTTPStatus, retryAfter: 30 * time.Second},
		{status: 400, text: "Invalid Topic header", class: herald.ErrorRejected, permanent: true},
		{status: 401, text: "VAPID: bad signature", class: herald.ErrorRejected, permanent: true},
		{status: 403, text: "BadJwtToken", class: herald.ErrorRejected, permanent: true},
		{status: 500, text: "oops", class: herald.ErrorHTTPStatus},
		{status: 502, class: herald.ErrorHTTPStatus},
	} {
		ps.answer(tc.status, tc.text, tc.header)
		res := p.Send(t.Context(), request(ps.destination(), []byte(`{"n":1}`)))
		require.Equal(t, tc.status, res.Status)
		require.Equal(t, tc.class == herald.ErrorNone, res.Success, "%d: %+v", tc.status, res)
		require.Equal(t, tc.class, res.Class, "%d: %+v", tc.status, res)
		require.Equal(t, tc.permanent, res.Permanent, "%d: %+v", tc.status, res)
		require.Equal(t, tc.retryAfter, res.RetryAfter, "%d", tc.status)
		if tc.text != "" {
			require.Contains(t, res.Message, tc.text, "the push service's text")
			require.Equal(t, tc.text, res.Excerpt)
		}
	}
}

// TestSendRefusedLocally: what is never sent, and what the guard refuses.
func TestSendRefusedLocally(t *testing.T) {
	t.Parallel()
	vapid := newVAPIDKey(t)
	ps := newPushService(t, vapid)
	p := newTestPublisher(t, vapid, true)

	bad := func(mut func(d *herald.Destination)) herald.Destination {
		d := ps.destination()
		sub := *d.Subscription
		d.Subscription = &sub
		mut(&d)
		return d
	}
	neg := -1
	for name, tc := range map[string]struct {
		d     herald.Destination
		class herald.ErrorClass
	}{
		"bad p256dh":       {bad(func(d *herald.Destination) { d.Subscription.Keys.P256DH = "AAAA" }), herald.ErrorInvalidRequest},
		"bad auth":         {bad(func(d *herald.Destination) { d.Subscription.Keys.Auth = "AAAA" }), herald.ErrorInvalidRequest},
		"no subscription":  {bad(func(d *herald.Destination) { d.Subscription = nil }), herald.ErrorInvalidRequest},
		"relative":         {bad(func(d *herald.Destination) { d.Subscription.Endpoint = "/wpush" }), herald.ErrorInvalidRequest},
		"ftp":              {bad(func(d *herald.Destination) { d.Subscription.Endpoint = "ftp://x/y" }), herald.ErrorInvalidRequest},
		"urgency":          {bad(func(d *herald.Destination) { d.Urgency = "urgent" }), herald.ErrorInvalidRequest},
		"ttl":              {bad(func(d *herald.Destination) { d.TTLS = &neg }), herald.ErrorInvalidRequest},
		"topic":            {bad(func(d *herald.Destination) { d.Topic = "not a topic" }), herald.ErrorInvalidRequest},
		"payload too long": {ps.destination(), herald.ErrorPayloadTooLarge},
	} {
		body := []byte(`{}`)
		if tc.class == herald.ErrorPayloadTooLarge {
			body = bytes.Repeat([]byte("x"), MaxPlaintext+1)
		}
		res := p.Send(t.Context(), request(tc.d, body))
		require.Equal(t, tc.class, res.Class, "%s: %+v", name, res)
		require.True(t, res.Permanent, name)
		require.False(t, res.Success, name)
		if tc.class == herald.ErrorPayloadTooLarge {
			require.Contains(t, res.Message, "3994 bytes")
		}
	}
	require.Empty(t, ps.received(), "nothing invalid reached the push service")

	// The largest payload that fits is sent, as a 4096-byte body.
	res := p.Send(t.Context(), request(ps.destination(), bytes.Repeat([]byte("x"), MaxPlaintext)))
	require.True(t, res.Success, "%+v", res)
	got := ps.received()
	require.Len(t, got, 1)
	require.Len(t, got[0].body, MaxBody)
	require.Len(t, got[0].plain, MaxPlaintext)

	// https only, unless --dev.
	strict := New(Config{Sender: webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}), Keys: staticKeys{vapid}})
	res = strict.Send(t.Context(), request(ps.destination(), []byte(`{}`)))
	require.Equal(t, herald.ErrorInvalidRequest, res.Class)
	require.Contains(t, res.Message, "https")

	// The SSRF guard applies to push endpoints: loopback only with --dev.
	guarded := newTestPublisher(t, vapid, false)
	res = guarded.Send(t.Context(), request(ps.destination(), []byte(`{}`)))
	require.Equal(t, herald.ErrorDestinationForbidden, res.Class, "%+v", res)
	require.False(t, res.Permanent)

	// A push service that is down: retried through the tiers.
	down := ps.destination()
	ps.Close()
	res = p.Send(t.Context(), request(down, []byte(`{}`)))
	require.Equal(t, herald.ErrorConnection, res.Class, "%+v", res)
	require.False(t, res.Permanent)

	p.Close()
	require.False(t, p.Send(t.Context(), request(down, []byte(`{}`))).Success)
}

// TestCheck: the field each problem is reported under (the API's
// invalid_field names destination.<field>).
func TestCheck(t *testing.T) {
	t.Parallel()
	ua := newUserAgent(t)
	good := func() herald.Destination {
		return herald.Destination{Type: herald.DestinationWebPush, Subscription: &herald.PushSubscription{
			Endpoint: "https://push.example.test/wpush/v2/abc",
			Keys:     herald.PushKeys{P256DH: ua.p256dh(), Auth: ua.authB64()},
		}}
	}
	field, err := Check(good(), false)
	require.NoError(t, err)
	require.Empty(t, field)
	neg, ttl := -1, 0
	for want, mut := range map[string]func(d *herald.Destination){
		"subscription":             func(d *herald.Destination) { d.Subscription = nil },
		"subscription.keys.p256dh": func(d *herald.Destination) { d.Subscription.Keys.P256DH = "BAAA" },
		"subscription.keys.auth":   func(d *herald.Destination) { d.Subscription.Keys.Auth = "" },
		"subscription.endpoint":    func(d *herald.Destination) { d.Subscription.Endpoint = "http://push.example.test/x" },
		"urgency":                  func(d *herald.Destination) { d.Urgency = "urgent" },
		"ttl_s":                    func(d *herald.Destination) { d.TTLS = &neg },
		"topic":                    func(d *herald.Destination) { d.Topic = strings.Repeat("t", 33) },
	} {
		d := good()
		mut(&d)
		field, err := Check(d, false)
		require.Error(t, err, want)
		require.Equal(t, want, field, err)
	}
	d := good()
	d.Subscription.Endpoint = "http://127.0.0.1:8080/wpush/v2/abc"
	d.TTLS, d.Urgency, d.Topic = &ttl, "very-low", "a_B-9"
	_, err = Check(d, true)
	require.NoError(t, err, "http with --dev; TTL 0 is valid")
}
