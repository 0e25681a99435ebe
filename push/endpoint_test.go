package push

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/openapi/openapitest"
	"github.com/heraldhq/herald/store"
)

// httpEnv is a push service on the public routes of a real listener
// (127.0.0.1) and its internal routes on another.
type httpEnv struct {
	*testEnv
	base     string // http://127.0.0.1:port
	internal string // http://127.0.0.1:port of the internal listener
}

// setupHTTP starts a push.Server made by New on a real listener, with
// EndpointURL equal to its own address. Options as setup's (func(*Config)).
func setupHTTP(t *testing.T, opts ...func(*Config)) *httpEnv {
	t.Helper()
	return setupHTTPListener(t, nil, opts...)
}

// setupHTTPListener is setupHTTP whose public listener is wrap(listener)
// when wrap is not nil.
func setupHTTPListener(t *testing.T, wrap func(net.Listener) net.Listener, opts ...func(*Config)) *httpEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if wrap != nil {
		ln = wrap(ln)
	}
	iln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	keys, err := ParseKeys(GenerateKey())
	require.NoError(t, err)
	clock := &fakeClock{now: time.Now().Truncate(time.Millisecond)}
	obs := &countObserver{acks: map[int]int{}, nacks: map[int]int{}}
	cfg := Config{
		Keys:        keys,
		EndpointURL: base,
		NodeID:      "http://" + iln.Addr().String(),
		AckWait:     5 * time.Second,
		Observer:    obs,
		Now:         clock.Now,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Store == nil {
		cfg.Store = newTestStore(t)
	}
	fault := &faultStore{PushStore: cfg.Store, fails: map[string]error{}}
	cfg.Store = fault
	s, err := New(cfg)
	require.NoError(t, err)
	s.hub.minPingInterval = 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Next", "1")
		http.NotFound(w, r)
	})
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: openapiChecked(t, s.Wrap(next))}}
	srv.Start()
	isrv := &httptest.Server{Listener: iln, Config: &http.Server{Handler: s.InternalHandler()}}
	isrv.Start()
	t.Cleanup(func() {
		_ = s.Close()
		srv.Close()
		isrv.Close()
	})
	return &httpEnv{
		testEnv:  &testEnv{s: s, h: s.hub, st: fault.PushStore, fault: fault, clock: clock, obs: obs, url: "ws://" + ln.Addr().String() + "/"},
		base:     base,
		internal: cfg.NodeID,
	}
}

// openapiChecked serves through h and holds every exchange against the
// OpenAPI document, except WebSocket sessions (hijacked: no answer to
// check) and what next answered (the API's, in herald serve).
func openapiChecked(t *testing.T, h http.Handler) http.Handler {
	doc, err := openapitest.Default()
	require.NoError(t, err)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the request body: %v", err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) == 0 {
			body = nil
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if rec.Header().Get("X-Next") == "" {
			if err := doc.Check(r, body, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
				t.Errorf("OpenAPI: %v", err)
			}
		}
	})
}

// vapidKey is an application server's key pair.
type vapidKey struct {
	priv *ecdsa.PrivateKey
	pub  []byte // 65-byte uncompressed point
}

func newVAPIDKey(t testing.TB) *vapidKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ek, err := priv.ECDH()
	require.NoError(t, err)
	return &vapidKey{priv: priv, pub: ek.PublicKey().Bytes()}
}

// header returns "vapid t=<jwt>, k=<key>" for aud, expiring at exp.
func (k *vapidKey) header(t *testing.T, aud string, exp time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"aud": aud, "exp": exp.Unix(), "sub": "mailto:ops@example.test"})
	s, err := tok.SignedString(k.priv)
	require.NoError(t, err)
	return "vapid t=" + s + ", k=" + base64.RawURLEncoding.EncodeToString(k.pub)
}

type sendOpts struct {
	ttl     string // "" leaves TTL out
	topic   string
	body    []byte
	headers map[string]string
	method  string
}

func (e *httpEnv) post(t *testing.T, endpoint string, o sendOpts) *http.Response {
	t.Helper()
	method := o.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, endpoint, bytes.NewReader(o.body))
	require.NoError(t, err)
	if o.ttl != "" {
		req.Header.Set("TTL", o.ttl)
	}
	if o.topic != "" {
		req.Header.Set("Topic", o.topic)
	}
	if len(o.body) > 0 && o.headers == nil {
		req.Header.Set("Content-Encoding", "aes128gcm")
	}
	for k, v := range o.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// postAsync sends a push message from another goroutine (the answer waits
// for the user agent's ack) and returns its status (-1 on a transport
// error). headers are set as given; the body, when non-nil, is sent as is.
func postAsync(url string, body []byte, headers map[string]string) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			done <- -1
			return
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- -1
			return
		}
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// errBody reads an autopush error answer.
func errBody(t *testing.T, resp *http.Response) (status, errno int) {
	t.Helper()
	var b struct {
		Code  int    `json:"code"`
		Errno int    `json:"errno"`
		Error string `json:"error"`
	}
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &b), string(raw))
	require.Equal(t, resp.StatusCode, b.Code, string(raw))
	return b.Code, b.Errno
}

func requireErr(t *testing.T, resp *http.Response, status, errno int) {
	t.Helper()
	st, en := errBody(t, resp)
	require.Equal(t, status, st)
	require.Equal(t, errno, en)
}

func TestEndpointDirectDelivery(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, uaid, chid := e.connected(t)
	_ = chid
	ep := e.endpointOf(t, c)
	requireErr(t, e.post(t, ep, sendOpts{}), 400, ErrnoMissingTTL)

	body := []byte("ciphertext-bytes")
	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, ep, bytes.NewReader(body))
		req.Header.Set("TTL", "60")
		req.Header.Set("Content-Encoding", "aes128gcm")
		req.Header.Set("Urgency", "high")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			done <- resp
		}
	}()
	n := c.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString(body), n["data"])
	require.Equal(t, map[string]any{"encoding": "aes128gcm"}, n["headers"], "no Urgency, TTL or VAPID reach the user agent")
	c.ack(n["channelID"].(string), n["version"].(string))
	resp := <-done
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "60", resp.Header.Get("TTL"))
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), e.base+"/m/"), resp.Header.Get("Location"))
	require.Empty(t, e.stored(t, uaid), "a direct message acked is not stored")
}

// endpointOf registers a new channel on c and returns its endpoint.
func (e *httpEnv) endpointOf(t *testing.T, c *client) string {
	t.Helper()
	return c.register(newChid())
}

func TestEndpointStoredWhileAwayThenDelivered(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, uaid, _ := e.connected(t)
	ep := e.endpointOf(t, c)
	require.NoError(t, c.ws.Close())
	e.waitGone(t)

	resp := e.post(t, ep, sendOpts{ttl: "3000000", body: []byte("while away")})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, strconv.Itoa(MaxTTL), resp.Header.Get("TTL"), "TTL capped at 30 days and echoed")
	require.Len(t, e.stored(t, uaid), 1)

	// TTL 0 while away: dropped, still 201.
	resp = e.post(t, ep, sendOpts{ttl: "0", body: []byte("now or never")})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Len(t, e.stored(t, uaid), 1)

	c2 := e.dial(t)
	c2.hello(uaid, nil)
	n := c2.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("while away")), n["data"])
	c2.ack(n["channelID"].(string), n["version"].(string))
	c2.sync()
	waitFor(t, "acked message deleted", func() bool { return len(e.stored(t, uaid)) == 0 })
}

func TestEndpointExpiredNeverDelivered(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, uaid, _ := e.connected(t)
	ep := e.endpointOf(t, c)
	require.NoError(t, c.ws.Close())
	e.waitGone(t)
	require.Equal(t, http.StatusCreated, e.post(t, ep, sendOpts{ttl: "1", body: []byte("short")}).StatusCode)
	require.Equal(t, http.StatusCreated, e.post(t, ep, sendOpts{ttl: "100", body: []byte("long")}).StatusCode)
	e.clock.Advance(time.Second) // the 1 s message is now expired
	c2 := e.dial(t)
	c2.hello(uaid, nil)
	n := c2.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("long")), n["data"])
	c2.ack(n["channelID"].(string), n["version"].(string))
	c2.sync()
}

func TestEndpointTopicReplaces(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, uaid, _ := e.connected(t)
	ep := e.endpointOf(t, c)
	require.NoError(t, c.ws.Close())
	e.waitGone(t)
	require.Equal(t, http.StatusCreated, e.post(t, ep, sendOpts{ttl: "100", topic: "news", body: []byte("v1")}).StatusCode)
	require.Equal(t, http.StatusCreated, e.post(t, ep, sendOpts{ttl: "100", topic: "news", body: []byte("v2")}).StatusCode)
	require.Len(t, e.stored(t, uaid), 1)
	c2 := e.dial(t)
	c2.hello(uaid, nil)
	n := c2.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("v2")), n["data"])
	c2.ack(n["channelID"].(string), n["version"].(string))
	c2.sync()
	waitFor(t, "topic message deleted on ack", func() bool { return len(e.stored(t, uaid)) == 0 })

	for _, bad := range []string{"has space", strings.Repeat("a", 33), "a=b", "ünï"} {
		requireErr(t, e.post(t, ep, sendOpts{ttl: "100", topic: bad, body: []byte("x")}), 400, ErrnoInvalidTopic)
	}
}

func TestEndpointUnregisteredIsGone(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, _, _ := e.connected(t)
	chid := newChid()
	ep := c.register(chid)
	c.send(map[string]any{"messageType": "unregister", "channelID": chid})
	c.readType("unregister")
	resp := e.post(t, ep, sendOpts{ttl: "60"})
	require.Equal(t, "max-age=86400", resp.Header.Get("Cache-Control"))
	requireErr(t, resp, 410, ErrnoNoSubscription)
}

func TestEndpointBodies(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, _, _ := e.connected(t)
	ep := e.endpointOf(t, c)

	// A body without crypto headers.
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60", body: []byte("x"), headers: map[string]string{}}), 400, ErrnoInvalidCrypto)
	// Too large.
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60", body: bytes.Repeat([]byte("a"), MaxBodyBytes+1)}), 413, ErrnoPayloadTooLarge)

	// 5,624 bytes (upstream's test_big_message) and an empty body are
	// delivered; the empty one without data or headers.
	for _, body := range [][]byte{bytes.Repeat([]byte("b"), 5624), nil} {
		h := map[string]string{"TTL": "60"}
		if body != nil {
			h["Content-Encoding"] = "aes128gcm"
		}
		done := postAsync(ep, body, h)
		raw := c.readRaw()
		var n map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &n))
		if body == nil {
			require.NotContains(t, raw, `"data"`)
			require.NotContains(t, raw, `"headers"`)
		} else {
			require.Equal(t, base64.RawURLEncoding.EncodeToString(body), n["data"])
		}
		c.ack(n["channelID"].(string), n["version"].(string))
		require.Equal(t, http.StatusCreated, <-done)
	}

	// Legacy aesgcm: quotes and padding stripped, the VAPID key dropped.
	done := postAsync(ep, []byte("legacy"), map[string]string{
		"TTL": "60", "Content-Encoding": "aesgcm",
		"Encryption": `keyid="p256dh";salt="XZwpw6o37R-6qoZjw6KwAw=="`,
		"Crypto-Key": `keyid="p256dh";dh="BDgpRKok2GZZDmS4r63vbJSUtcQx4Fq1V58-6-3NbZzSTlZsQiCEDTQy3CZ0ZMsqeqsEb7qW2blQHA4S48fynTk="`,
	})
	n := c.readType("notification")
	h := n["headers"].(map[string]any)
	require.Equal(t, "aesgcm", h["encoding"])
	require.Equal(t, "keyid=p256dh;salt=XZwpw6o37R-6qoZjw6KwAw", h["encryption"])
	require.NotContains(t, h["crypto_key"], `"`)
	c.ack(n["channelID"].(string), n["version"].(string))
	require.Equal(t, http.StatusCreated, <-done)
}

func TestEndpointDeleteMessage(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, uaid, _ := e.connected(t)
	ep := e.endpointOf(t, c)
	require.NoError(t, c.ws.Close())
	e.waitGone(t)
	resp := e.post(t, ep, sendOpts{ttl: "100", body: []byte("withdraw me")})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Len(t, e.stored(t, uaid), 1)
	loc := resp.Header.Get("Location")
	del := e.post(t, loc, sendOpts{method: http.MethodDelete})
	require.Equal(t, http.StatusNoContent, del.StatusCode)
	require.Empty(t, e.stored(t, uaid))
	// Again: still 204. A forged id: 404 errno 102.
	require.Equal(t, http.StatusNoContent, e.post(t, loc, sendOpts{method: http.MethodDelete}).StatusCode)
	requireErr(t, e.post(t, e.base+"/m/not-a-token", sendOpts{method: http.MethodDelete}), 404, ErrnoInvalidToken)
}

func TestEndpointBadTokens(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, _, _ := e.connected(t)
	ep := e.endpointOf(t, c)
	tok := ep[strings.LastIndex(ep, "/")+1:]
	for name, url := range map[string]string{
		"truncated":     e.base + "/wpush/v1/" + tok[:len(tok)-10],
		"forged":        e.base + "/wpush/v1/" + strings.Repeat("A", len(tok)),
		"v1 on v2 path": e.base + "/wpush/v2/" + tok,
		"bad version":   e.base + "/wpush/v9/" + tok,
	} {
		resp := e.post(t, url, sendOpts{ttl: "60"})
		st, en := errBody(t, resp)
		require.Equal(t, 404, st, name)
		require.Equal(t, ErrnoInvalidToken, en, name)
	}
	// No version: v1.
	done := postAsync(e.base+"/wpush/"+tok, nil, map[string]string{"TTL": "60"})
	n := c.readType("notification")
	c.ack(n["channelID"].(string), n["version"].(string))
	require.Equal(t, http.StatusCreated, <-done)
	// Only POST.
	resp := e.post(t, ep, sendOpts{ttl: "60", method: http.MethodPut})
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestEndpointVAPID(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, _, _ := e.connected(t)
	key := newVAPIDKey(t)
	chid := newChid()
	c.send(map[string]any{"messageType": "register", "channelID": chid, "key": base64.RawURLEncoding.EncodeToString(key.pub)})
	r := c.readType("register")
	ep := r["pushEndpoint"].(string)
	require.Contains(t, ep, "/wpush/v2/")
	now := e.clock.Now()

	// v2 without VAPID, with another key, with a wrong aud, with exp too far.
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60"}), 401, ErrnoVAPID)
	other := newVAPIDKey(t)
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60", headers: map[string]string{"Authorization": other.header(t, e.base, now.Add(time.Hour))}}), 401, ErrnoVAPID)
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60", headers: map[string]string{"Authorization": key.header(t, "https://elsewhere.example", now.Add(time.Hour))}}), 401, ErrnoVAPID)
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60", headers: map[string]string{"Authorization": key.header(t, e.base, now.Add(25*time.Hour))}}), 401, ErrnoVAPID)
	bad := key.header(t, e.base, now.Add(time.Hour))
	bad = bad[:strings.Index(bad, ", k=")-3] + "AAA" + bad[strings.Index(bad, ", k="):]
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60", headers: map[string]string{"Authorization": bad}}), 401, ErrnoVAPID)
	resp := e.post(t, ep, sendOpts{ttl: "60", headers: map[string]string{"Authorization": "vapid t=abc"}})
	require.Equal(t, "vapid", resp.Header.Get("WWW-Authenticate"))
	requireErr(t, resp, 401, ErrnoVAPID)

	// The right key: 201, and the user agent sees no VAPID.
	done := postAsync(ep, nil, map[string]string{"TTL": "60", "Authorization": key.header(t, e.base, now.Add(24*time.Hour))})
	raw := c.readRaw()
	require.NotContains(t, raw, "vapid")
	var n map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &n))
	c.ack(n["channelID"].(string), n["version"].(string))
	require.Equal(t, http.StatusCreated, <-done)

	// v1 endpoint of a channel without key: VAPID optional but checked.
	ep1 := e.endpointOf(t, c)
	requireErr(t, e.post(t, ep1, sendOpts{ttl: "0", headers: map[string]string{"Authorization": key.header(t, "https://elsewhere.example", now.Add(time.Hour))}}), 401, ErrnoVAPID)
}

func TestInternalRoutes(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, uaid, _ := e.connected(t)
	_ = c
	// Not on the public listener: 404, not 405.
	resp := e.post(t, e.base+"/notif/"+uaid, sendOpts{method: http.MethodPut})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = e.post(t, e.base+"/push/"+uaid, sendOpts{method: http.MethodPut})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	// Internal without the bearer: 401; with it: 200 here, 404 elsewhere.
	resp = e.post(t, e.internal+"/notif/"+uaid, sendOpts{method: http.MethodPut})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	auth := map[string]string{"Authorization": "Bearer " + e.s.cfg.Keys.InternalToken(time.Now())}
	resp = e.post(t, e.internal+"/notif/"+uaid, sendOpts{method: http.MethodPut, headers: auth})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp = e.post(t, e.internal+"/notif/"+newUAID(), sendOpts{method: http.MethodPut, headers: auth})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	// GET / without an upgrade is the next handler's.
	resp = e.post(t, e.base+"/", sendOpts{method: http.MethodGet})
	require.Equal(t, "1", resp.Header.Get("X-Next"))
}

// TestHandoffBetweenNodes runs two push services on one store: a message
// POSTed to node B reaches the user agent connected to node A through A's
// internal listener; with A gone, B stores it.
func TestHandoffBetweenNodes(t *testing.T) {
	t.Parallel()
	shared := newTestStore(t)
	keys := GenerateKey()
	withStore := func(c *Config) {
		c.Store = shared
		k, err := ParseKeys(keys)
		if err == nil {
			c.Keys = k
		}
	}
	a := setupHTTP(t, withStore)
	b := setupHTTP(t, withStore)
	c, uaid, _ := a.connected(t)
	ep := a.endpointOf(t, c)
	epB := strings.Replace(ep, a.base, b.base, 1)

	done := postAsync(epB, []byte("via B"), map[string]string{"TTL": "60", "Content-Encoding": "aes128gcm"})
	n := c.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("via B")), n["data"])
	c.ack(n["channelID"].(string), n["version"].(string))
	require.Equal(t, http.StatusCreated, <-done)
	require.Empty(t, b.stored(t, uaid))

	// The user agent's node dies without clearing its record (kill -9):
	// B cannot reach it, clears the record and stores the message.
	_ = a.s.Close()
	u, err := shared.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.NoError(t, shared.PushUserConnect(context.Background(), &store.PushUserConnectParams{
		UAID: uaid, NodeID: "http://127.0.0.1:1", ConnectedAt: u.ConnectedAt + 1, Now: time.Now(),
	}))
	resp := b.post(t, epB, sendOpts{ttl: "60", body: []byte("stored by B")})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Len(t, b.stored(t, uaid), 1)
	u, err = shared.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.Empty(t, u.NodeID, "an unreachable node's record is cleared")
}

// TestEndpointRouteCache: a channel registered in a session here is routed
// without a store read; unregister and re-register drop the cached entry,
// so an unregistered channel answers 410 and a new key is enforced.
func TestEndpointRouteCache(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	c, _, _ := e.connected(t)
	chid := newChid()
	ep := c.register(chid)
	sendAcked := func() int {
		done := postAsync(ep, nil, map[string]string{"TTL": "60"})
		n := c.readType("notification")
		c.ack(n["channelID"].(string), n["version"].(string))
		return <-done
	}
	before := e.fault.routeGets.Load()
	for range 3 {
		require.Equal(t, http.StatusCreated, sendAcked())
	}
	require.Equal(t, before, e.fault.routeGets.Load(), "no store read for a channel registered in a session here")

	// Re-registered with a key: the v1 endpoint now needs that key's VAPID.
	key := newVAPIDKey(t)
	c.send(map[string]any{"messageType": "register", "channelID": chid, "key": base64.RawURLEncoding.EncodeToString(key.pub)})
	c.readType("register")
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60"}), 401, ErrnoVAPID)

	c.send(map[string]any{"messageType": "unregister", "channelID": chid})
	c.readType("unregister")
	requireErr(t, e.post(t, ep, sendOpts{ttl: "60"}), 410, ErrnoNoSubscription)
}
