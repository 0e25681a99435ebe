package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestBroadcastRulesForClients: a user agent is held to the admin API's
// broadcast rules (CheckBroadcast): an id over 128 bytes or a version
// over 256 closes the session with 1002, in hello and in
// broadcast_subscribe; ids and versions at the limits are served.
func TestBroadcastRulesForClients(t *testing.T) {
	t.Parallel()
	e := setup(t)
	longID := strings.Repeat("a", MaxBroadcastIDLen+1)
	longVersion := strings.Repeat("v", MaxBroadcastVersionLen+1)

	c := e.dial(t)
	c.send(map[string]any{"messageType": "hello", "broadcasts": map[string]string{longID: "v1"}})
	c.expectClose(closeProtocol)

	c = e.dial(t)
	c.send(map[string]any{"messageType": "hello", "broadcasts": map[string]string{"b": longVersion}})
	c.expectClose(closeProtocol)

	c = e.dial(t)
	c.send(map[string]any{"messageType": "hello", "broadcasts": map[string]string{"bad id": "v1"}})
	c.expectClose(closeProtocol)

	c = e.dial(t)
	c.hello("", nil)
	c.send(map[string]any{"messageType": "broadcast_subscribe", "broadcasts": map[string]string{longID: "v1"}})
	c.expectClose(closeProtocol)

	maxID := strings.Repeat("a", MaxBroadcastIDLen)
	c = e.dial(t)
	r := c.hello("", map[string]string{maxID: strings.Repeat("v", MaxBroadcastVersionLen)})
	require.Equal(t, map[string]any{"errors": map[string]any{maxID: broadcastNotFound}}, r["broadcasts"])
	c.sync()
}

// TestBroadcastSessionKeepsBounded: unknown ids keep no version, and a
// session follows at most maxSessionBroadcastBytes of ids.
func TestBroadcastSessionKeepsBounded(t *testing.T) {
	t.Parallel()
	var r broadcastRegistry
	r.set(map[string]string{"known": "v2"})
	var gen uint64
	subs, reply := r.subscribe(nil, &gen, map[string]string{"known": "v1"})
	require.Equal(t, map[string]any{"known": "v2"}, reply)
	client := map[string]string{}
	for i := range maxSessionBroadcasts {
		id := strings.Repeat(string(rune('a'+i%26)), MaxBroadcastIDLen-2) + string(rune('a'+i/26)) + "x"
		client[id] = strings.Repeat("v", MaxBroadcastVersionLen)
	}
	subs, reply = r.subscribe(subs, &gen, client)
	require.Equal(t, "v2", subs["known"])
	require.Len(t, reply["errors"], maxSessionBroadcasts, "every unknown id is answered")
	idBytes, versionBytes := 0, 0
	for id, v := range subs {
		idBytes += len(id)
		if id != "known" {
			versionBytes += len(v)
		}
	}
	require.LessOrEqual(t, idBytes, maxSessionBroadcastBytes)
	require.Zero(t, versionBytes, "no version of an unknown broadcast is kept")
	require.Less(t, len(subs), maxSessionBroadcasts)

	// An unknown id created later still reaches the session.
	var followed string
	for id := range subs {
		if id != "known" {
			followed = id
			break
		}
	}
	r.set(map[string]string{"known": "v2", followed: "v9"})
	require.Equal(t, map[string]any{followed: "v9"}, r.delta(subs, &gen))
}

// TestFrameLimit: a client frame over 8 KiB closes the session with 1009.
func TestFrameLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.dial(t)
	c.hello("", nil)
	// A ping of exactly the limit is read.
	c.sendRaw("{" + strings.Repeat(" ", maxFrameBytes-2) + "}")
	require.Equal(t, "{}", c.readRaw())
	c.sendRaw("{" + strings.Repeat(" ", 8<<10) + "}")
	c.expectClose(1009)
}

// syncBuffer is a log destination tests read while sessions write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUAIDNotLogged: the uaid is a bearer credential; logs name a user
// agent by uaid_hash (uaidLog) only.
func TestUAIDNotLogged(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := setup(t,
		func(c *Config) {
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		},
		func(h *hub) { h.minPingInterval = time.Hour })
	c, uaid, _ := e.connected(t)
	// A failing register logs at ERROR.
	e.fault.fail("PushChannelAdd", errors.New("disk on fire"))
	c.send(map[string]any{"messageType": "register", "channelID": newChid()})
	require.EqualValues(t, 500, c.readType("register")["status"])
	// Pinging too often closes with 1011 and logs at WARN.
	c.sync()
	c.sendRaw("{}")
	c.expectClose(closeError)
	e.waitGone(t)

	out := logs.String()
	require.Contains(t, out, "push: register")
	require.Contains(t, out, "push: closing session")
	require.Contains(t, out, "uaid_hash="+uaidLog(uaid))
	require.NotContains(t, out, uaid)
	require.Len(t, uaidLog(uaid), 8)
}

// sendResult is one sender's answer.
type sendResult struct {
	status     int
	retryAfter string
	location   string
}

// sendTo POSTs body to an endpoint (TTL 60) from another goroutine and
// puts the answer on out.
func sendTo(url, body string, out chan<- sendResult) {
	go func() {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			out <- sendResult{status: -1}
			return
		}
		req.Header.Set("TTL", "60")
		req.Header.Set("Content-Encoding", "aes128gcm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- sendResult{status: -1}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		out <- sendResult{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), location: resp.Header.Get("Location")}
	}()
}

// TestBurstToConnectedUANeverResets: a burst of 400 sends to a connected
// user agent that acks everything never resets it (issue 20, item 6: with
// the defaults, the 272 beyond the queue used to be stored, read back and
// counted toward the message limit of 150). Sends
// beyond its queue are answered 429 with Retry-After and not stored;
// every message answered 201 reaches the user agent and none is deleted
// unread.
func TestBurstToConnectedUANeverResets(t *testing.T) {
	t.Parallel()
	const queue, limit, sends = ClientChannelCapacity, DefaultMsgLimit, 400
	e := setupHTTP(t, func(c *Config) { c.MsgLimit = limit; c.AckWait = 10 * time.Second })
	c, uaid, _ := e.connected(t)
	ep := e.endpointOf(t, c)

	// The user agent reads every frame; its acks are held until release
	// is closed (so the queue fills), then everything is acked.
	release := make(chan struct{})
	var mu sync.Mutex
	received := map[string]bool{} // message ids
	sessionErr := make(chan error, 2)
	toAck := make(chan [2]string, 1000)
	go func() {
		for {
			_ = c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, data, err := c.ws.ReadMessage()
			if err != nil {
				sessionErr <- err
				return
			}
			var n struct{ MessageType, ChannelID, Version string }
			if json.Unmarshal(data, &n) != nil || n.MessageType != "notification" {
				continue
			}
			ref, err := e.s.cfg.Keys.ParseMessageID(n.Version)
			if err != nil {
				sessionErr <- err
				return
			}
			mu.Lock()
			received[ref.ID] = true
			mu.Unlock()
			toAck <- [2]string{n.ChannelID, n.Version}
		}
	}()
	go func() {
		<-release
		for a := range toAck {
			b, _ := json.Marshal(map[string]any{"messageType": "ack", "updates": []map[string]any{{"channelID": a[0], "version": a[1], "code": 100}}})
			if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				sessionErr <- err
				return
			}
		}
	}()

	results := make(chan sendResult, sends)
	for i := range sends {
		sendTo(ep, fmt.Sprintf("burst %d", i), results)
	}
	// The sends beyond the queue are answered while the first ones wait
	// for their acks.
	answers := make([]sendResult, 0, sends)
	next := func() {
		select {
		case r := <-results:
			answers = append(answers, r)
		case <-time.After(15 * time.Second):
			t.Fatalf("only %d of %d sends answered", len(answers), sends)
		}
	}
	for range sends - queue {
		next()
	}
	close(release)
	for len(answers) < sends {
		next()
	}

	var created []string
	tooMany := 0
	for _, a := range answers {
		switch a.status {
		case http.StatusCreated:
			i := strings.LastIndex(a.location, "/m/")
			ref, err := e.s.cfg.Keys.ParseMessageID(a.location[i+3:])
			require.NoError(t, err)
			created = append(created, ref.ID)
		case http.StatusTooManyRequests:
			tooMany++
			require.Equal(t, "10", a.retryAfter, "a 429 carries Retry-After (AckWait)")
		default:
			t.Fatalf("unexpected answer %d", a.status)
		}
	}
	require.GreaterOrEqual(t, len(created), queue)
	waitFor(t, "every message answered 201 reaches the user agent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range created {
			if !received[id] {
				return false
			}
		}
		return true
	})
	waitFor(t, "nothing stored", func() bool { return len(e.stored(t, uaid)) == 0 })
	select {
	case err := <-sessionErr:
		t.Fatalf("the session ended: %v", err)
	default:
	}
	_, err := e.st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err, "the user agent was not reset")
	require.Equal(t, 1, e.h.Connected())
	require.Equal(t, sends-queue, tooMany, "every send beyond the queue is refused")
}

// TestSendRateLimit: sends to one endpoint beyond Limits.SendRate/SendBurst
// are answered 429 errno 201 with Retry-After; other endpoints and a
// later send pass (issue 20, item 5).
func TestSendRateLimit(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t, func(c *Config) { c.Limits = Limits{SendRate: 1, SendBurst: 2} })
	c, _, _ := e.connected(t)
	ep, other := e.endpointOf(t, c), e.endpointOf(t, c)
	// TTL 0 to a connected user agent: written, not awaited.
	send := func(ep string) *http.Response { return e.post(t, ep, sendOpts{ttl: "0"}) }
	require.Equal(t, http.StatusCreated, send(ep).StatusCode)
	require.Equal(t, http.StatusCreated, send(ep).StatusCode)
	resp := send(ep)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	requireErr(t, resp, http.StatusTooManyRequests, ErrnoRetry)
	require.Equal(t, http.StatusCreated, send(other).StatusCode, "the rate is per endpoint")
	e.clock.Advance(time.Second)
	require.Equal(t, http.StatusCreated, send(ep).StatusCode)
}

// TestStoredMessageCaps: an offline user agent's stored messages are
// capped per channel and per user agent; a send beyond a cap is answered
// 429 errno 201 with Retry-After and stores nothing (issue 20, item 5).
func TestStoredMessageCaps(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t, func(c *Config) { c.Limits = Limits{MaxMessagesPerUAID: 3, MaxMessagesPerChannel: 2} })
	c, uaid, _ := e.connected(t)
	ep1, ep2 := e.endpointOf(t, c), e.endpointOf(t, c)
	require.NoError(t, c.ws.Close())
	e.waitGone(t)
	send := func(ep string) *http.Response { return e.post(t, ep, sendOpts{ttl: "60", body: []byte("offline")}) }
	require.Equal(t, http.StatusCreated, send(ep1).StatusCode)
	require.Equal(t, http.StatusCreated, send(ep1).StatusCode)
	resp := send(ep1)
	require.Equal(t, "300", resp.Header.Get("Retry-After"))
	requireErr(t, resp, http.StatusTooManyRequests, ErrnoRetry) // the channel's cap
	require.Equal(t, http.StatusCreated, send(ep2).StatusCode)
	requireErr(t, send(ep2), http.StatusTooManyRequests, ErrnoRetry) // the user agent's cap
	require.Len(t, e.stored(t, uaid), 3)
}

// TestRegisterLimits: registers beyond Limits.MaxChannels answer status
// 409, beyond Limits.RegisterRate/RegisterBurst 429; the session stays
// and nothing is stored (issue 20, item 5).
func TestRegisterLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.Limits = Limits{MaxChannels: 2, RegisterRate: 1, RegisterBurst: 3} })
	c, uaid, _ := e.connected(t) // one register
	chid2, chid3 := newChid(), newChid()
	c.register(chid2)
	reg := func(chid string) map[string]any {
		c.send(map[string]any{"messageType": "register", "channelID": chid})
		return c.readType("register")
	}
	r := reg(chid3)
	require.EqualValues(t, registerChannelsCap, r["status"], r)
	require.Empty(t, r["pushEndpoint"])
	r = reg(chid3)
	require.EqualValues(t, registerTooMany, r["status"], r)
	c.sync()
	_, err := e.st.PushRouteGet(context.Background(), &store.PushRouteGetParams{UAID: uaid, ChannelID: chid3})
	require.ErrorIs(t, err, herald.ErrNotFound)
	// A token later, registering a channel again passes the cap.
	e.clock.Advance(time.Second)
	c.register(chid2)
}

// TestKeyedLimiterBounded: the buckets kept never pass maxKeys; the least
// recently used goes first.
func TestKeyedLimiterBounded(t *testing.T) {
	t.Parallel()
	l := newKeyedLimiter[string](1, 1)
	l.maxKeys = 3
	now := time.Now()
	for _, k := range []string{"a", "b", "c"} {
		ok, _ := l.allow(k, now)
		require.True(t, ok)
	}
	ok, wait := l.allow("a", now)
	require.False(t, ok)
	require.Equal(t, time.Second, wait)
	ok, _ = l.allow("d", now) // evicts b, the least recently used
	require.True(t, ok)
	require.Equal(t, 3, l.len())
	ok, _ = l.allow("b", now) // a fresh bucket
	require.True(t, ok)
	ok, _ = l.allow("a", now) // a was kept: still empty
	require.False(t, ok)
	require.Nil(t, newKeyedLimiter[string](0, 10), "rate 0: no limit")
	ok, _ = (*keyedLimiter[string])(nil).allow("x", now)
	require.True(t, ok)
}

// TestQueueFullThroughHandoff: a send through another node to a user
// agent whose queue is full on its node is answered 429 too, and stored
// nowhere (the hand-off answers 429, not "not here").
func TestQueueFullThroughHandoff(t *testing.T) {
	t.Parallel()
	shared := newTestStore(t)
	keys := GenerateKey()
	withStore := func(c *Config) {
		c.Store = shared
		k, err := ParseKeys(keys)
		if err == nil {
			c.Keys = k
		}
		c.AckWait = 10 * time.Second
	}
	a := setupHTTP(t, withStore)
	b := setupHTTP(t, withStore)
	c, uaid, _ := a.connected(t)
	ep := a.endpointOf(t, c)
	// Fill the queue on A: the user agent reads and never acks.
	pending := make(chan sendResult, ClientChannelCapacity)
	for i := range ClientChannelCapacity {
		sendTo(ep, fmt.Sprintf("fill %d", i), pending)
	}
	for range ClientChannelCapacity {
		c.readType("notification")
	}
	resp := b.post(t, strings.Replace(ep, a.base, b.base, 1), sendOpts{ttl: "60", body: []byte("via B")})
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	requireErr(t, resp, http.StatusTooManyRequests, ErrnoRetry)
	require.Empty(t, b.stored(t, uaid))
	u, err := shared.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	require.Equal(t, a.internal, u.NodeID, "the live session's router record stays")
}

// dialFromAddr opens a session of e from the local address ip and says
// hello with a new uaid.
func (e *testEnv) dialFromAddr(t *testing.T, ip string) *client {
	t.Helper()
	ws, resp, err := dialFrom(t, e.url, ip)
	require.NoError(t, err)
	c := &client{t: t, ws: ws, resp: resp}
	c.hello("", nil)
	return c
}

// registerStatus registers a new channel and returns the reply's status.
func (c *client) registerStatus() int {
	c.t.Helper()
	c.send(map[string]any{"messageType": "register", "channelID": newChid()})
	r := c.readType("register")
	if r["status"] != 200.0 {
		require.Empty(c.t, r["pushEndpoint"], r)
	}
	return int(r["status"].(float64))
}

// TestRegisterLimitPerAddress: the registers of every user agent at one
// client address share Limits.RegisterIPBurst, so a client that
// reconnects without its uaid (a new user agent, a fresh per-uaid burst)
// gains nothing; another address has its own (issue 20, item 5).
func TestRegisterLimitPerAddress(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		c.Limits = Limits{RegisterRate: 1, RegisterBurst: 100, RegisterIPRate: 1, RegisterIPBurst: 3}
	})
	a := e.dialFromAddr(t, "127.0.0.1")
	for range 2 {
		require.Equal(t, 200, a.registerStatus())
	}
	b := e.dialFromAddr(t, "127.0.0.1") // a new uaid, the same address
	require.Equal(t, 200, b.registerStatus())
	require.Equal(t, registerTooMany, b.registerStatus())
	require.Equal(t, registerTooMany, a.registerStatus())
	other := e.dialFromAddr(t, "127.0.0.2")
	require.Equal(t, 200, other.registerStatus())
	b.sync() // the session stays
	e.clock.Advance(time.Second)
	require.Equal(t, 200, b.registerStatus())
	require.Equal(t, registerTooMany, a.registerStatus())
}

// TestRegisterLimitNode: Limits.RegisterNodeRate bounds the registers of
// the node across addresses, with a burst of as many; a register it
// refuses gives back the token its address's limit took (issue 20,
// item 5).
func TestRegisterLimitNode(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		// An address's bucket refills only after 1,000 s: a token not
		// given back would show.
		c.Limits = Limits{RegisterIPRate: 0.001, RegisterIPBurst: 1, RegisterNodeRate: 2}
	})
	a := e.dialFromAddr(t, "127.0.0.2")
	b := e.dialFromAddr(t, "127.0.0.3")
	c := e.dialFromAddr(t, "127.0.0.4")
	require.Equal(t, 200, a.registerStatus())
	require.Equal(t, 200, b.registerStatus())
	require.Equal(t, registerTooMany, c.registerStatus()) // the node's burst is spent
	// A second later the node's bucket is full again.
	e.clock.Advance(time.Second)
	require.Equal(t, 200, c.registerStatus(), "c's address kept its token")
	require.Equal(t, registerTooMany, c.registerStatus(), "c's address's token is spent")
	d := e.dialFromAddr(t, "127.0.0.5")
	require.Equal(t, 200, d.registerStatus(), "c's refusal left the node's token")
	require.Equal(t, registerTooMany, d.registerStatus())
}

// TestRegisterLimitDefaults: every Limits default is on in herald serve;
// the node's bucket holds one second of its rate.
func TestRegisterLimitDefaults(t *testing.T) {
	t.Parallel()
	l := newRegisterLimit(DefaultLimits)
	require.NotNil(t, l.uaid)
	require.NotNil(t, l.addr)
	require.NotNil(t, l.node)
	require.Equal(t, int(DefaultLimits.RegisterNodeRate), l.node.Burst())
	off := newRegisterLimit(Limits{})
	ok, _ := off.allow("u", netip.Addr{}, time.Now())
	require.True(t, ok)
}

// TestRefusedRegisterPausesReads: after a register refused for its rate the
// session's next frame is read only when the limit could allow it again
// (at most maxRefusedPause later), so a client that ignores the refusal
// gets one answer per refill instead of one per round trip.
func TestRefusedRegisterPausesReads(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) {
		c.Limits = Limits{RegisterRate: 2, RegisterBurst: 1} // a token every 500 ms
	})
	a := e.dialFromAddr(t, "127.0.0.1")
	require.Equal(t, 200, a.registerStatus())
	require.Equal(t, registerTooMany, a.registerStatus())
	// The test's clock stands still, so the limit still refuses; what is
	// measured is when the node read the frame, on the real clock.
	start := time.Now()
	require.Equal(t, registerTooMany, a.registerStatus())
	require.GreaterOrEqual(t, time.Since(start), 450*time.Millisecond, "the frame after a refusal was read at once")
}
