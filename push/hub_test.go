package push

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/sqlite"
)

// fakeClock is the injected clock of the protocol-level timing rules
// (ping rate, message expiry); socket deadlines use real time.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// countObserver records the connection side's measurements.
type countObserver struct {
	nopObserver
	connected atomic.Int64
	mu        sync.Mutex
	acks      map[int]int
	nacks     map[int]int
}

func (o *countObserver) ObserveConnected(d int) { o.connected.Add(int64(d)) }

func (o *countObserver) ObserveAck(code int) {
	o.mu.Lock()
	o.acks[code]++
	o.mu.Unlock()
}

func (o *countObserver) ObserveNack(code int) {
	o.mu.Lock()
	o.nacks[code]++
	o.mu.Unlock()
}

func (o *countObserver) counts() (acks, nacks map[int]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	acks, nacks = map[int]int{}, map[int]int{}
	for k, v := range o.acks {
		acks[k] = v
	}
	for k, v := range o.nacks {
		nacks[k] = v
	}
	return acks, nacks
}

// faultStore wraps a store and fails the named methods.
type faultStore struct {
	store.PushStore
	mu        sync.Mutex
	fails     map[string]error
	saveHook  func()
	routeGets atomic.Int64
	userGets  atomic.Int64

	connectHook  func(items int)
	connectCalls atomic.Int64
}

// PushRouteGet counts the endpoint's store reads.
func (f *faultStore) PushRouteGet(ctx context.Context, p *store.PushRouteGetParams) (*store.PushRoute, error) {
	f.routeGets.Add(1)
	return f.PushStore.PushRouteGet(ctx, p)
}

func (f *faultStore) fail(method string, err error) {
	f.mu.Lock()
	f.fails[method] = err
	f.mu.Unlock()
}

func (f *faultStore) err(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fails[method]
}

// PushUserConnectMany fails as "PushUserConnect" is set to: a conflict
// refuses every item, any other error fails the statement. It counts the
// statements and calls the hook set with onConnect first.
func (f *faultStore) PushUserConnectMany(ctx context.Context, p *store.PushUserConnectManyParams) ([]store.PushUserConnectResult, error) {
	f.connectCalls.Add(1)
	f.mu.Lock()
	hook := f.connectHook
	f.mu.Unlock()
	if hook != nil {
		hook(len(p.Connects))
	}
	if err := f.err("PushUserConnect"); err != nil {
		if !errors.Is(err, herald.ErrConflict) {
			return nil, err
		}
		out := make([]store.PushUserConnectResult, len(p.Connects))
		for i := range out {
			out[i].Err = err
		}
		return out, nil
	}
	return f.PushStore.PushUserConnectMany(ctx, p)
}

func (f *faultStore) onConnect(hook func(items int)) {
	f.mu.Lock()
	f.connectHook = hook
	f.mu.Unlock()
}

func (f *faultStore) PushUserGet(ctx context.Context, uaid string) (*store.PushUser, error) {
	f.userGets.Add(1)
	if err := f.err("PushUserGet"); err != nil {
		return nil, err
	}
	return f.PushStore.PushUserGet(ctx, uaid)
}

// PushMessageSave calls the hook set with onSave first.
func (f *faultStore) PushMessageSave(ctx context.Context, p *store.PushMessageSaveParams) (*store.PushMessageSaveResult, error) {
	f.mu.Lock()
	hook := f.saveHook
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return f.PushStore.PushMessageSave(ctx, p)
}

func (f *faultStore) onSave(hook func()) {
	f.mu.Lock()
	f.saveHook = hook
	f.mu.Unlock()
}

func (f *faultStore) PushChannelAdd(ctx context.Context, p *store.PushChannelAddParams) error {
	if err := f.err("PushChannelAdd"); err != nil {
		return err
	}
	return f.PushStore.PushChannelAdd(ctx, p)
}

func (f *faultStore) PushChannelRemove(ctx context.Context, p *store.PushChannelRemoveParams) (bool, error) {
	if err := f.err("PushChannelRemove"); err != nil {
		return false, err
	}
	return f.PushStore.PushChannelRemove(ctx, p)
}

type testEnv struct {
	s     *Server
	h     *hub
	st    store.PushStore
	fault *faultStore
	clock *fakeClock
	obs   *countObserver
	url   string // ws://127.0.0.1:port/
}

const testNode = "http://127.0.0.1:1/"

// setup starts a hub on 127.0.0.1. Options are func(*Config), applied
// before the hub is made, and func(*hub), applied before it serves. The
// protocol ping limit is off unless a test sets it (sync pings freely).
func setup(t *testing.T, opts ...any) *testEnv {
	t.Helper()
	keys, err := ParseKeys(GenerateKey())
	require.NoError(t, err)
	clock := &fakeClock{now: time.Now().Truncate(time.Millisecond)}
	obs := &countObserver{acks: map[int]int{}, nacks: map[int]int{}}
	fault := &faultStore{PushStore: newTestStore(t), fails: map[string]error{}}
	cfg := Config{
		Store:            fault,
		Keys:             keys,
		EndpointURL:      "https://push.example.test",
		NodeID:           testNode,
		AckWait:          10 * time.Second,
		HandshakeTimeout: 5 * time.Second,
		Observer:         obs,
		Now:              clock.Now,
	}
	for _, o := range opts {
		if m, ok := o.(func(*Config)); ok {
			m(&cfg)
		}
	}
	s := &Server{cfg: cfg}
	s.hub = newHub(s)
	s.hub.minPingInterval = 0
	for _, o := range opts {
		if m, ok := o.(func(*hub)); ok {
			m(s.hub)
		}
	}
	srv := httptest.NewServer(s.hub) // listens on 127.0.0.1
	t.Cleanup(func() {
		s.hub.Close()
		srv.Close()
	})
	return &testEnv{
		s: s, h: s.hub, st: fault.PushStore, fault: fault, clock: clock, obs: obs,
		url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/",
	}
}

// newTestStore is the store the push tests run against: a real SQLite
// store in a temporary directory (the conformance suite proves the same
// behaviour on PostgreSQL).
func newTestStore(t *testing.T) store.PushStore {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "herald.db"), Synchronous: "normal"})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type client struct {
	t    *testing.T
	ws   *websocket.Conn
	resp *http.Response
}

func (e *testEnv) dial(t *testing.T, subprotocols ...string) *client {
	t.Helper()
	d := websocket.Dialer{Subprotocols: subprotocols, HandshakeTimeout: 5 * time.Second}
	ws, resp, err := d.Dial(e.url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return &client{t: t, ws: ws, resp: resp}
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	require.NoError(c.t, c.ws.WriteMessage(websocket.TextMessage, []byte(s)))
}

func (c *client) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(c.t, err)
	c.sendRaw(string(b))
}

// readRaw returns the next text frame (5 s deadline).
func (c *client) readRaw() string {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(5*time.Second)))
	mt, data, err := c.ws.ReadMessage()
	require.NoError(c.t, err)
	require.Equal(c.t, websocket.TextMessage, mt)
	return string(data)
}

func (c *client) read() map[string]any {
	c.t.Helper()
	raw := c.readRaw()
	var m map[string]any
	require.NoError(c.t, json.Unmarshal([]byte(raw), &m), raw)
	return m
}

// readType reads the next frame and requires its messageType.
func (c *client) readType(typ string) map[string]any {
	c.t.Helper()
	m := c.read()
	require.Equal(c.t, typ, m["messageType"], m)
	return m
}

// expectClose reads until the server's close frame and requires its code.
func (c *client) expectClose(code int) {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(5*time.Second)))
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			require.True(c.t, errors.As(err, &ce), "want close %d, got %v", code, err)
			require.Equal(c.t, code, ce.Code, ce.Text)
			return
		}
		c.t.Logf("frame before close: %s", data)
	}
}

// sync sends a ping and requires its reply to be the next frame: every
// frame a preceding client frame caused has been read by then.
func (c *client) sync() {
	c.t.Helper()
	c.sendRaw("{}")
	require.Equal(c.t, "{}", c.readRaw())
}

func (c *client) hello(uaid string, broadcasts map[string]string) map[string]any {
	c.t.Helper()
	m := map[string]any{"messageType": "hello", "use_webpush": true}
	if uaid != "" {
		m["uaid"] = uaid
	}
	if broadcasts != nil {
		m["broadcasts"] = broadcasts
	}
	c.send(m)
	r := c.readType("hello")
	require.EqualValues(c.t, 200, r["status"])
	return r
}

func (c *client) register(chid string) string {
	c.t.Helper()
	c.send(map[string]any{"messageType": "register", "channelID": chid})
	r := c.readType("register")
	require.EqualValues(c.t, 200, r["status"], r)
	return r["pushEndpoint"].(string)
}

func (c *client) ack(chid, version string) {
	c.t.Helper()
	c.send(map[string]any{"messageType": "ack", "updates": []map[string]any{{"channelID": chid, "version": version, "code": 100}}})
}

// waitFor polls cond until it holds (5 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGone waits until every session ended and was torn down.
func (e *testEnv) waitGone(t *testing.T) {
	t.Helper()
	waitFor(t, "sessions torn down", func() bool { return e.obs.connected.Load() == 0 && e.h.Connected() == 0 })
}

var chidN atomic.Int64

func newChid() string {
	n := chidN.Add(1)
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n)
}

// seedUser stores a user agent with the given channels.
func (e *testEnv) seedUser(t *testing.T, chids ...string) string {
	t.Helper()
	ctx := context.Background()
	uaid := newUAID()
	now := e.clock.Now()
	require.NoError(t, e.st.PushUserCreate(ctx, &store.PushUserCreateParams{UAID: uaid, ConnectedAt: now.Add(-time.Hour).UnixMilli(), Now: now}))
	for _, chid := range chids {
		require.NoError(t, e.st.PushChannelAdd(ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid, Now: now}))
	}
	return uaid
}

// msg builds a message for uaid/chid created now.
func (e *testEnv) msg(uaid, chid string, ttl int, data string, topic string) *store.PushMessage {
	now := e.clock.Now()
	m := &store.PushMessage{
		ID: herald.NewID(herald.PrefixPushMessage), UAID: uaid, ChannelID: chid, Topic: topic, TTL: ttl,
		CreatedAt: now, ExpiresAt: now.Add(time.Duration(ttl) * time.Second),
	}
	if data != "" {
		m.Data = []byte(data)
		m.Headers = map[string]string{"encoding": "aes128gcm"}
	}
	return m
}

func (e *testEnv) save(t *testing.T, msgs ...*store.PushMessage) {
	t.Helper()
	res, err := e.st.PushMessageSave(context.Background(), &store.PushMessageSaveParams{UAID: msgs[0].UAID, Messages: msgs})
	require.NoError(t, err)
	require.Empty(t, res.Unregistered)
}

func (e *testEnv) stored(t *testing.T, uaid string) []*store.PushMessage {
	t.Helper()
	msgs, err := e.st.PushMessageList(context.Background(), &store.PushMessageListParams{UAID: uaid, Now: e.clock.Now(), Limit: 1000})
	require.NoError(t, err)
	return msgs
}

var hex32 = func(s string) bool { _, ok := uuidHex(s); return ok && len(s) == 32 && strings.ToLower(s) == s }

func TestHelloNewUAID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t, "push-notification")
	require.Equal(t, "push-notification", c.resp.Header.Get("Sec-WebSocket-Protocol"))
	c.sendRaw(`{"messageType":"hello","use_webpush":true}`)
	raw := c.readRaw()
	var r struct{ UAID string }
	require.NoError(t, json.Unmarshal([]byte(raw), &r))
	require.True(t, hex32(r.UAID), raw)
	require.Equal(t, `{"messageType":"hello","uaid":"`+r.UAID+`","status":200,"use_webpush":true,"broadcasts":{}}`, raw)
	// Not written until the first register.
	_, err := e.st.PushUserGet(context.Background(), r.UAID)
	require.ErrorIs(t, err, herald.ErrNotFound)
	waitFor(t, "connected", func() bool { return e.obs.connected.Load() == 1 })
	require.Equal(t, 1, e.h.Connected())
}

func TestHelloWithoutSubprotocol(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	require.Empty(t, c.resp.Header.Get("Sec-WebSocket-Protocol"))
	c.hello("", nil)
}

func TestHelloInvalidOrUnknownUAIDGetsNewOne(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, uaid := range []string{"not-a-uaid", newUAID(), "", "zz" + newUAID()[2:]} {
		c := e.dial(t)
		r := c.hello(uaid, nil)
		require.NotEqual(t, uaid, r["uaid"])
		require.True(t, hex32(r["uaid"].(string)))
	}
}

func TestHelloReturningUAID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	uaid := e.seedUser(t, newChid())
	// Dashed and upper-case: normalised.
	dashed := strings.ToUpper(uaid[0:8] + "-" + uaid[8:12] + "-" + uaid[12:16] + "-" + uaid[16:20] + "-" + uaid[20:])
	c := e.dial(t, "push-notification")
	r := c.hello(dashed, nil)
	require.Equal(t, uaid, r["uaid"])
	u, err := e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.Equal(t, testNode, u.NodeID)
	require.Equal(t, e.clock.Now().UnixMilli(), u.ConnectedAt)

	// Closing clears the router record.
	require.NoError(t, c.ws.Close())
	e.waitGone(t)
	u, err = e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.Empty(t, u.NodeID)
}

func TestHelloTwiceCloses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	c.hello("", nil)
	c.sendRaw(`{"messageType":"hello"}`)
	c.expectClose(closeProtocol)
	e.waitGone(t)
}

func TestHandshakeTimeout(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.HandshakeTimeout = 100 * time.Millisecond })
	c := e.dial(t)
	c.expectClose(closeError)
}

func TestFirstMessageMustBeHello(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	c.sendRaw(`{"messageType":"register","channelID":"` + newChid() + `"}`)
	c.expectClose(closeProtocol)
}

func TestBadFramesClose(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, tc := range []struct {
		name  string
		frame func(c *client)
		code  int
	}{
		{"unknown type", func(c *client) { c.sendRaw(`{"messageType":"subscribe"}`) }, closeUnsupported},
		{"malformed JSON", func(c *client) { c.sendRaw(`{"messageType":"ping"`) }, closeProtocol},
		{"no messageType", func(c *client) { c.sendRaw(`{"uaid":"x"}`) }, closeProtocol},
		{"wrong field type", func(c *client) { c.sendRaw(`{"messageType":"ack","updates":"x"}`) }, closeProtocol},
		{"binary", func(c *client) {
			require.NoError(t, c.ws.WriteMessage(websocket.BinaryMessage, []byte(`{}`)))
		}, closeUnsupported},
		{"oversized", func(c *client) {
			c.sendRaw(`{"messageType":"nack","version":"` + strings.Repeat("a", maxFrameBytes) + `"}`)
		}, websocket.CloseMessageTooBig},
		{"upper-case channelID", func(c *client) {
			c.sendRaw(`{"messageType":"register","channelID":"0C9C7B42-4D5E-4F1C-9D2A-1F3E5A7B9C0D"}`)
		}, closeProtocol},
		{"undashed channelID", func(c *client) {
			c.sendRaw(`{"messageType":"register","channelID":"` + strings.ReplaceAll(newChid(), "-", "") + `"}`)
		}, closeProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dial(t)
			c.hello("", nil)
			tc.frame(c)
			c.expectClose(tc.code)
		})
	}
	e.waitGone(t)
}

func TestPing(t *testing.T) {
	t.Parallel()
	e := setup(t, func(h *hub) { h.minPingInterval = 45 * time.Second })
	c := e.dial(t)
	c.hello("", nil)
	c.sendRaw(`{}`)
	require.Equal(t, "{}", c.readRaw())
	e.clock.Advance(45 * time.Second)
	c.sendRaw(`{"messageType":"ping"}`)
	require.Equal(t, "{}", c.readRaw())
	// A second one within 45 s: closed with an error code.
	e.clock.Advance(44 * time.Second)
	c.sendRaw(` { } `)
	c.expectClose(closeError)
}

func TestRegister(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	uaid := c.hello("", nil)["uaid"].(string)
	chid := newChid()
	c.send(map[string]any{"messageType": "register", "channelID": chid})
	raw := c.readRaw()
	var r registerReply
	require.NoError(t, json.Unmarshal([]byte(raw), &r))
	prefix := "https://push.example.test/wpush/v1/"
	require.True(t, strings.HasPrefix(r.PushEndpoint, prefix), raw)
	token := strings.TrimPrefix(r.PushEndpoint, prefix)
	require.Equal(t, `{"messageType":"register","channelID":"`+chid+`","status":200,"pushEndpoint":"`+r.PushEndpoint+`"}`, raw)
	ep, err := e.s.cfg.Keys.ParseEndpointToken(token, 1)
	require.NoError(t, err)
	require.Equal(t, &Endpoint{UAID: uaid, ChannelID: chid}, ep)
	// The first register wrote the user agent, connected here.
	route, err := e.st.PushRouteGet(context.Background(), &store.PushRouteGetParams{UAID: uaid, ChannelID: chid})
	require.NoError(t, err)
	require.Equal(t, testNode, route.NodeID)
	require.Nil(t, route.KeyHash)
	// A second register of another channel reuses the user.
	c.register(newChid())
}

func TestRegisterWithKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	key := make([]byte, 65)
	key[0] = 4
	for i := 1; i < 65; i++ {
		key[i] = byte(i * 7)
	}
	sum := sha256.Sum256(key)
	for _, enc := range []string{
		base64.URLEncoding.EncodeToString(key), // padded, as Firefox sends it
		base64.RawURLEncoding.EncodeToString(key),
		base64.StdEncoding.EncodeToString(key),
	} {
		c := e.dial(t)
		uaid := c.hello("", nil)["uaid"].(string)
		chid := newChid()
		c.send(map[string]any{"messageType": "register", "channelID": chid, "key": enc})
		r := c.readType("register")
		require.EqualValues(t, 200, r["status"], r)
		prefix := "https://push.example.test/wpush/v2/"
		endpoint := r["pushEndpoint"].(string)
		require.True(t, strings.HasPrefix(endpoint, prefix), endpoint)
		ep, err := e.s.cfg.Keys.ParseEndpointToken(strings.TrimPrefix(endpoint, prefix), 2)
		require.NoError(t, err)
		require.Equal(t, sum[:], ep.KeyHash)
		route, err := e.st.PushRouteGet(context.Background(), &store.PushRouteGetParams{UAID: uaid, ChannelID: chid})
		require.NoError(t, err)
		require.Equal(t, sum[:], route.KeyHash)
	}
}

func TestRegisterBadKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	uaid := c.hello("", nil)["uaid"].(string)
	chid := newChid()
	for _, key := range []string{"!!!not base64!!!", ""} {
		c.send(map[string]any{"messageType": "register", "channelID": chid, "key": key})
		require.Equal(t, `{"messageType":"register","channelID":"`+chid+`","status":400,"pushEndpoint":"Failed to generate endpoint"}`, c.readRaw())
	}
	// Nothing written, and the session goes on.
	_, err := e.st.PushUserGet(context.Background(), uaid)
	require.ErrorIs(t, err, herald.ErrNotFound)
	c.sync()
}

func TestRegisterStoreError(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	c.hello("", nil)
	e.fault.fail("PushChannelAdd", herald.ErrStoreUnavailable)
	chid := newChid()
	c.send(map[string]any{"messageType": "register", "channelID": chid})
	require.Equal(t, `{"messageType":"register","channelID":"`+chid+`","status":500,"pushEndpoint":""}`, c.readRaw())
	e.fault.fail("PushChannelAdd", nil)
	c.register(chid)
}

func TestUnregister(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	uaid := c.hello("", nil)["uaid"].(string)
	chid := newChid()
	c.register(chid)
	for range 2 { // idempotent
		c.send(map[string]any{"messageType": "unregister", "channelID": chid, "code": 200})
		require.Equal(t, `{"messageType":"unregister","channelID":"`+chid+`","status":200}`, c.readRaw())
	}
	_, err := e.st.PushRouteGet(context.Background(), &store.PushRouteGetParams{UAID: uaid, ChannelID: chid})
	require.ErrorIs(t, err, herald.ErrNotFound)
	// Unregister before any register (user not stored) is fine too.
	c2 := e.dial(t)
	c2.hello("", nil)
	c2.send(map[string]any{"messageType": "unregister", "channelID": chid})
	require.Equal(t, `{"messageType":"unregister","channelID":"`+chid+`","status":200}`, c2.readRaw())

	e.fault.fail("PushChannelRemove", herald.ErrStoreUnavailable)
	c.send(map[string]any{"messageType": "unregister", "channelID": chid})
	require.Equal(t, `{"messageType":"unregister","channelID":"`+chid+`","status":500}`, c.readRaw())
}

func TestNackAndAckCodesCounted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	c.hello("", nil)
	c.sendRaw(`{"messageType":"nack","version":"x","code":302}`)
	c.sendRaw(`{"messageType":"nack","version":"x"}`)
	chid := newChid()
	c.sendRaw(`{"messageType":"ack","updates":[{"channelID":"` + chid + `","version":"unknown","code":101},{"channelID":"` + chid + `","version":"other"}]}`)
	c.sync() // no reply to nack or ack
	acks, nacks := e.obs.counts()
	require.Equal(t, map[int]int{101: 1, 100: 1}, acks)
	require.Equal(t, map[int]int{302: 1, 0: 1}, nacks)
}

func TestBroadcasts(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.PingInterval = 50 * time.Millisecond })
	ctx := context.Background()
	require.NoError(t, e.st.PushBroadcastPut(ctx, &store.PushBroadcastPutParams{ID: "remote-settings/monitor_changes", Version: `"1234"`, Now: e.clock.Now()}))
	require.NoError(t, e.st.PushBroadcastPut(ctx, &store.PushBroadcastPutParams{ID: "b", Version: "v2", Now: e.clock.Now()}))
	require.NoError(t, e.s.broadcastChanged(ctx))

	t.Run("hello delta and errors", func(t *testing.T) {
		c := e.dial(t)
		c.send(map[string]any{"messageType": "hello", "broadcasts": map[string]string{
			"remote-settings/monitor_changes": `"1000"`, "b": "v2", "nope": "v1",
		}})
		raw := c.readRaw()
		var r struct{ UAID string }
		require.NoError(t, json.Unmarshal([]byte(raw), &r))
		require.Equal(t, `{"messageType":"hello","uaid":"`+r.UAID+`","status":200,"use_webpush":true,"broadcasts":{"errors":{"nope":"Broadcast not found"},"remote-settings/monitor_changes":"\"1234\""}}`, raw)
	})
	t.Run("no change", func(t *testing.T) {
		c := e.dial(t)
		r := c.hello("", map[string]string{"b": "v2"})
		require.Equal(t, map[string]any{}, r["broadcasts"])
	})
	t.Run("subscribe", func(t *testing.T) {
		c := e.dial(t)
		c.hello("", nil)
		c.send(map[string]any{"messageType": "broadcast_subscribe", "broadcasts": map[string]string{"b": "v1", "x": "1"}})
		require.Equal(t, `{"messageType":"broadcast","broadcasts":{"b":"v2","errors":{"x":"Broadcast not found"}}}`, c.readRaw())
		// Up to date: no reply.
		c.send(map[string]any{"messageType": "broadcast_subscribe", "broadcasts": map[string]string{"b": "v2"}})
		c.sync()

		// A change reaches the subscriber on a ping tick, instead of a ping.
		require.NoError(t, e.st.PushBroadcastPut(ctx, &store.PushBroadcastPutParams{ID: "b", Version: "v3", Now: e.clock.Now()}))
		require.NoError(t, e.s.broadcastChanged(ctx))
		require.Equal(t, `{"messageType":"broadcast","broadcasts":{"b":"v3"}}`, c.readRaw())
	})
}

func TestKeepalivePings(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		c.PingInterval = 20 * time.Millisecond
		c.PingTimeout = 100 * time.Millisecond
	})
	c := e.dial(t)
	pings := make(chan struct{}, 100)
	c.ws.SetPingHandler(func(data string) error {
		pings <- struct{}{}
		return c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	c.hello("", nil)
	go func() { _, _, _ = c.ws.ReadMessage() }() // control frames are handled while reading
	for range 3 {
		select {
		case <-pings:
		case <-time.After(5 * time.Second):
			t.Fatal("no ping")
		}
	}
}

func TestPongTimeoutCloses(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		c.PingInterval = 20 * time.Millisecond
		c.PingTimeout = 50 * time.Millisecond
	})
	c := e.dial(t)
	c.ws.SetPingHandler(func(string) error { return nil }) // never answers
	c.hello("", nil)
	c.expectClose(closeError)
	e.waitGone(t)
}

// deliverAsync runs Deliver and returns its result on a channel.
type deliverResult struct {
	out DeliverOutcome
	err error
}

func (e *testEnv) deliverAsync(m *store.PushMessage) <-chan deliverResult {
	ch := make(chan deliverResult, 1)
	go func() {
		out, err := e.h.Deliver(context.Background(), m, "")
		ch <- deliverResult{out, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan deliverResult) deliverResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Deliver did not return")
		return deliverResult{}
	}
}

// connected returns a session of a stored user agent with one channel.
func (e *testEnv) connected(t *testing.T) (*client, string, string) {
	t.Helper()
	c := e.dial(t)
	uaid := c.hello("", nil)["uaid"].(string)
	chid := newChid()
	c.register(chid)
	return c, uaid, chid
}

func TestDeliverAcked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, uaid, chid := e.connected(t)
	m := e.msg(uaid, chid, 60, "hello bytes", "")
	res := e.deliverAsync(m)
	n := c.readType("notification")
	require.Equal(t, chid, n["channelID"])
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("hello bytes")), n["data"])
	require.Equal(t, map[string]any{"encoding": "aes128gcm"}, n["headers"])
	ref, err := e.s.cfg.Keys.ParseMessageID(n["version"].(string))
	require.NoError(t, err)
	require.Equal(t, &MessageRef{UAID: uaid, ChannelID: chid, ID: m.ID}, ref)
	c.ack(chid, n["version"].(string))
	r := wait(t, res)
	require.NoError(t, r.err)
	require.Equal(t, Delivered, r.out)
	require.Empty(t, e.stored(t, uaid))

	// Not connected here.
	out, err := e.h.Deliver(context.Background(), e.msg(newUAID(), chid, 60, "x", ""), "")
	require.NoError(t, err)
	require.Equal(t, NotConnected, out)
}

func TestDeliverEmptyBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, uaid, chid := e.connected(t)
	res := e.deliverAsync(e.msg(uaid, chid, 0, "", ""))
	raw := c.readRaw()
	require.NotContains(t, raw, `"data"`)
	require.NotContains(t, raw, `"headers"`)
	require.Equal(t, Delivered, wait(t, res).out)
}

func TestDeliverUnackedIsStoredAndLaterAckDeletes(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.AckWait = 50 * time.Millisecond })
	c, uaid, chid := e.connected(t)
	m := e.msg(uaid, chid, 60, "late", "")
	res := e.deliverAsync(m)
	n := c.readType("notification")
	r := wait(t, res)
	require.NoError(t, r.err)
	require.Equal(t, Stored, r.out)
	stored := e.stored(t, uaid)
	require.Len(t, stored, 1)
	require.Equal(t, m.ID, stored[0].ID)

	c.ack(chid, n["version"].(string))
	c.sync()
	require.Empty(t, e.stored(t, uaid))
}

func TestDeliverTTL0NotTracked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, uaid, chid := e.connected(t)
	res := e.deliverAsync(e.msg(uaid, chid, 0, "now or never", ""))
	c.readType("notification")
	require.Equal(t, Delivered, wait(t, res).out)
	require.NoError(t, c.ws.Close()) // no ack
	e.waitGone(t)
	require.Empty(t, e.stored(t, uaid))
	c2 := e.dial(t)
	c2.hello(uaid, nil)
	c2.sync() // nothing from storage
}

func TestUnackedDirectStoredOnCloseAndRedelivered(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, uaid, chid := e.connected(t)
	m := e.msg(uaid, chid, 60, "keep me", "")
	res := e.deliverAsync(m)
	c.readType("notification")
	require.NoError(t, c.ws.Close()) // gone without an ack
	r := wait(t, res)
	require.NoError(t, r.err)
	require.Equal(t, Stored, r.out)
	e.waitGone(t)

	c2 := e.dial(t)
	c2.hello(uaid, nil)
	n := c2.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("keep me")), n["data"])
	c2.ack(chid, n["version"].(string))
	c2.sync()
	require.Empty(t, e.stored(t, uaid))
}

func TestDeliverCapacity(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, uaid, chid := e.connected(t)
	var results []<-chan deliverResult
	for range ClientChannelCapacity {
		results = append(results, e.deliverAsync(e.msg(uaid, chid, 60, "x", "")))
	}
	for range ClientChannelCapacity {
		c.readType("notification")
	}
	out, err := e.h.Deliver(context.Background(), e.msg(uaid, chid, 60, "x", ""), "")
	require.NoError(t, err)
	require.Equal(t, QueueFull, out)
	require.Empty(t, e.stored(t, uaid), "a message beyond the queue is not stored")
	require.NoError(t, c.ws.Close())
	for _, r := range results {
		require.Equal(t, Stored, wait(t, r).out)
	}
}

func TestStoredBatches(t *testing.T) {
	t.Parallel()
	e := setup(t)
	chid, chid2 := newChid(), newChid()
	uaid := e.seedUser(t, chid, chid2)
	var msgs []*store.PushMessage
	for i := range 11 {
		msgs = append(msgs, e.msg(uaid, chid, 60, fmt.Sprintf("m%02d", i), ""))
	}
	e.save(t, msgs...)
	// Saved last, sent first.
	e.save(t, e.msg(uaid, chid2, 60, "topic", "t1"))

	c := e.dial(t)
	c.hello(uaid, nil)
	var got []map[string]any
	for range BatchSize {
		got = append(got, c.readType("notification"))
	}
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("topic")), got[0]["data"])
	for i := 1; i < BatchSize; i++ {
		require.Equal(t, base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "m%02d", i-1)), got[i]["data"])
	}
	// The next batch only once all of this one is acked.
	for _, n := range got[:BatchSize-1] {
		c.ack(n["channelID"].(string), n["version"].(string))
	}
	c.sync()
	// The topic message went on its own ack; the others wait for the batch.
	require.Len(t, e.stored(t, uaid), 11)
	c.ack(got[BatchSize-1]["channelID"].(string), got[BatchSize-1]["version"].(string))
	rest := []map[string]any{c.readType("notification"), c.readType("notification")}
	require.Len(t, e.stored(t, uaid), 2)
	for i, n := range rest {
		require.Equal(t, base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "m%02d", 9+i)), n["data"])
		c.ack(n["channelID"].(string), n["version"].(string))
	}
	c.sync()
	require.Empty(t, e.stored(t, uaid))
}

func TestPartialAckThenReconnect(t *testing.T) {
	t.Parallel()
	e := setup(t)
	chid := newChid()
	uaid := e.seedUser(t, chid)
	for i := range 5 {
		e.save(t, e.msg(uaid, chid, 60, fmt.Sprintf("m%d", i), ""))
	}
	c := e.dial(t)
	c.hello(uaid, nil)
	var got []map[string]any
	for range 5 {
		got = append(got, c.readType("notification"))
	}
	c.ack(chid, got[0]["version"].(string))
	c.ack(chid, got[2]["version"].(string))
	c.sync()
	require.Len(t, e.stored(t, uaid), 5) // the batch is not complete
	require.NoError(t, c.ws.Close())
	e.waitGone(t)
	// The acked ones of the unfinished batch were deleted at close.
	require.Len(t, e.stored(t, uaid), 3)

	c2 := e.dial(t)
	c2.hello(uaid, nil)
	var data []string
	for range 3 {
		data = append(data, c2.readType("notification")["data"].(string))
	}
	enc := base64.RawURLEncoding.EncodeToString
	require.Equal(t, []string{enc([]byte("m1")), enc([]byte("m3")), enc([]byte("m4"))}, data)
}

func TestExpiredNotDelivered(t *testing.T) {
	t.Parallel()
	e := setup(t)
	chid := newChid()
	uaid := e.seedUser(t, chid)
	e.save(t, e.msg(uaid, chid, 1, "short", ""), e.msg(uaid, chid, 60, "long", ""))
	e.clock.Advance(time.Second)
	c := e.dial(t)
	c.hello(uaid, nil)
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("long")), c.readType("notification")["data"])
	c.sync()
}

func TestMsgLimitResetsUAID(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.MsgLimit = 20 })
	chid := newChid()
	uaid := e.seedUser(t, chid)
	for i := range 21 {
		e.save(t, e.msg(uaid, chid, 60, fmt.Sprintf("m%d", i), ""))
	}
	c := e.dial(t)
	c.hello(uaid, nil)
	for range 2 {
		for range BatchSize {
			n := c.readType("notification")
			c.ack(chid, n["version"].(string))
		}
	}
	c.expectClose(closeUAIDReset)
	e.waitGone(t)
	_, err := e.st.PushUserGet(context.Background(), uaid)
	require.ErrorIs(t, err, herald.ErrNotFound)
}

func TestNotifyChecksStorage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, uaid, chid := e.connected(t)
	require.False(t, e.h.Notify(newUAID()))
	e.save(t, e.msg(uaid, chid, 60, "nudged", ""))
	require.True(t, e.h.Notify(uaid))
	n := c.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("nudged")), n["data"])
	c.ack(chid, n["version"].(string))
	c.sync()
	require.Empty(t, e.stored(t, uaid))
}

func TestGhostSecondSessionSameNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c1, uaid, _ := e.connected(t)
	c2 := e.dial(t)
	c2.hello(uaid, nil)
	c1.expectClose(closeError)
	waitFor(t, "one session", func() bool { return e.obs.connected.Load() == 1 })
	require.Equal(t, 1, e.h.Connected())
	// The router record names the newer session.
	u, err := e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.Equal(t, testNode, u.NodeID)
	c2.sync()
}

func TestTakeoverConflict(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	// Another node connected it after our clock's now.
	uaid := newUAID()
	require.NoError(t, e.st.PushUserCreate(ctx, &store.PushUserCreateParams{
		UAID: uaid, NodeID: "http://other:1", ConnectedAt: e.clock.Now().Add(time.Second).UnixMilli(), Now: e.clock.Now(),
	}))
	c := e.dial(t)
	c.send(map[string]any{"messageType": "hello", "uaid": uaid})
	c.expectClose(closeError)

	// The conditional update itself refuses (a takeover between read and
	// write).
	uaid2 := e.seedUser(t)
	e.fault.fail("PushUserConnect", herald.ErrConflict)
	c2 := e.dial(t)
	c2.send(map[string]any{"messageType": "hello", "uaid": uaid2})
	c2.expectClose(closeError)
	require.Equal(t, 0, e.h.Connected())
	u, err := e.st.PushUserGet(ctx, uaid)
	require.NoError(t, err)
	require.Equal(t, "http://other:1", u.NodeID)
}

func TestCloseStoresAndEndsSessions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, uaid, chid := e.connected(t)
	res := e.deliverAsync(e.msg(uaid, chid, 60, "at shutdown", ""))
	c.readType("notification")
	go func() { _, _, _ = c.ws.ReadMessage() }() // answer the close frame
	e.h.Close()
	require.Equal(t, Stored, wait(t, res).out)
	require.Len(t, e.stored(t, uaid), 1)
	require.Zero(t, e.obs.connected.Load())
}

func TestAckWhileStoring(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.AckWait = 20 * time.Millisecond })
	c, uaid, chid := e.connected(t)
	saving, release := make(chan struct{}), make(chan struct{})
	e.fault.onSave(func() {
		close(saving)
		<-release
	})
	res := e.deliverAsync(e.msg(uaid, chid, 60, "racy", ""))
	n := c.readType("notification")
	<-saving // AckWait passed; Deliver is storing it
	c.ack(chid, n["version"].(string))
	c.sync() // the ack was handled while the save is blocked
	e.fault.onSave(nil)
	close(release)
	r := wait(t, res)
	require.NoError(t, r.err)
	require.Equal(t, Delivered, r.out)
	require.Empty(t, e.stored(t, uaid)) // the stored copy was deleted
}

func TestDeliverContextEnds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c, uaid, chid := e.connected(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan deliverResult, 1)
	go func() {
		out, err := e.h.Deliver(ctx, e.msg(uaid, chid, 60, "abandoned", ""), "")
		ch <- deliverResult{out, err}
	}()
	c.readType("notification")
	cancel()
	r := wait(t, ch)
	require.ErrorIs(t, r.err, context.Canceled)
	// Still the session's: stored when the socket closes unacked.
	require.NoError(t, c.ws.Close())
	e.waitGone(t)
	require.Len(t, e.stored(t, uaid), 1)
}

// A returning user agent's hello is one store call, the conditional
// connect; a refused connect answers with the record it lost to, so the
// record is never read.
func TestReconnectHelloWithoutRead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	uaid := e.seedUser(t)
	c := e.dial(t)
	c.hello(uaid, nil)
	require.Equal(t, int64(0), e.fault.userGets.Load(), "PushUserGet calls")
	u, err := e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.Equal(t, testNode, u.NodeID)
	// A record stamped ahead of this node's clock, held by no node: the
	// refused connect names it and the session connects after it.
	_, err = e.st.PushUserDisconnect(context.Background(), &store.PushUserDisconnectParams{UAID: uaid, NodeID: testNode, ConnectedAt: u.ConnectedAt})
	require.NoError(t, err)
	require.NoError(t, c.ws.Close())
	e.waitGone(t)
	ahead := e.clock.Now().Add(time.Hour).UnixMilli()
	require.NoError(t, e.st.PushUserConnect(context.Background(), &store.PushUserConnectParams{UAID: uaid, NodeID: "", ConnectedAt: ahead, Now: e.clock.Now()}))
	c = e.dial(t)
	c.hello(uaid, nil)
	u, err = e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.Equal(t, testNode, u.NodeID)
	require.Equal(t, ahead+1, u.ConnectedAt)
	require.Equal(t, int64(0), e.fault.userGets.Load(), "PushUserGet calls")
}

func TestHelloStoreErrorCloses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	uaid := e.seedUser(t)
	e.fault.fail("PushUserConnect", herald.ErrStoreUnavailable)
	c := e.dial(t)
	c.send(map[string]any{"messageType": "hello", "uaid": uaid})
	c.expectClose(closeError)
	require.Equal(t, 0, e.h.Connected())
}

func TestGhostedSessionsUnackedReachNewSession(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c1, uaid, chid := e.connected(t)
	res := e.deliverAsync(e.msg(uaid, chid, 60, "in flight", ""))
	c1.readType("notification")
	// The user agent reconnects before the old socket is gone.
	c2 := e.dial(t)
	c2.hello(uaid, nil)
	c1.expectClose(closeError)
	require.Equal(t, Stored, wait(t, res).out)
	// Stored by the ghosted session after c2's own check: the nudge
	// brings it.
	n := c2.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("in flight")), n["data"])
	c2.ack(chid, n["version"].(string))
	c2.sync()
	require.Empty(t, e.stored(t, uaid))
}

// TestLongSessionRefreshesLastConnect: a user agent connected for longer
// than a day has its last_connect rewritten on a ping tick, so the idle
// sweep never drops a connected user agent.
func TestLongSessionRefreshesLastConnect(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		c.PingInterval = 20 * time.Millisecond
		c.PingTimeout = time.Second
	})
	c, uaid, _ := e.connected(t)
	c.ws.SetPingHandler(func(data string) error {
		return c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	go func() { _, _, _ = c.ws.ReadMessage() }()
	u, err := e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	first := u.LastConnect
	e.clock.Advance(25 * time.Hour)
	waitFor(t, "last_connect refreshed", func() bool {
		u, err := e.st.PushUserGet(context.Background(), uaid)
		return err == nil && u.LastConnect.After(first)
	})
}

// TestDeliverRightAfterHelloAnswer: a message handed over the moment the
// user agent has its hello answer (another node, reading the new router
// record) is delivered, not answered NotConnected (which made that node
// clear the record of a connected user agent), and its frame follows the
// answer.
func TestDeliverRightAfterHelloAnswer(t *testing.T) {
	t.Parallel()
	var e *testEnv
	got := make(chan deliverResult, 1)
	e = setup(t, func(h *hub) {
		h.afterHelloWrite = func(uaid string) {
			out, err := h.Deliver(context.Background(), e.msg(uaid, newChid(), 0, "first", ""), "")
			got <- deliverResult{out, err}
		}
	})
	c := e.dial(t)
	c.hello("", nil)
	r := wait(t, got)
	require.NoError(t, r.err)
	require.Equal(t, Delivered, r.out)
	n := c.readType("notification")
	require.NotEmpty(t, n["version"])
}

// A hello read after the user agent gave up on its connection (a busy
// node reads it late; the user agent reconnected meanwhile) does not take
// the router record from the session that replaced it: the session counts
// from its connection's upgrade, which came first.
func TestStaleHelloDoesNotTakeOver(t *testing.T) {
	t.Parallel()
	e := setup(t)
	uaid := e.seedUser(t)
	stale := e.dial(t) // upgraded now; its hello is read later
	e.clock.Advance(10 * time.Second)
	live := e.dial(t)
	live.hello(uaid, nil)
	u, err := e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	liveAt := u.ConnectedAt

	stale.send(map[string]any{"messageType": "hello", "uaid": uaid, "use_webpush": true})
	stale.expectClose(closeError)
	live.sync()
	u, err = e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.Equal(t, testNode, u.NodeID)
	require.Equal(t, liveAt, u.ConnectedAt, "the router record is still the live session's")
	require.Equal(t, 1, e.h.Connected())
}
