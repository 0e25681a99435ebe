package push

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// twoNodes starts nodes A and B on one store with the same keys; optA and
// optB configure each. A's public listener is wrapped by wrapA when set.
func twoNodes(t *testing.T, wrapA func(net.Listener) net.Listener, optA, optB func(*Config)) (a, b *httpEnv, shared store.PushStore) {
	t.Helper()
	shared = newTestStore(t)
	keys := GenerateKey()
	common := func(c *Config) {
		c.Store = shared
		k, err := ParseKeys(keys)
		require.NoError(t, err)
		c.Keys = k
	}
	a = setupHTTPListener(t, wrapA, common, orNop(optA))
	b = setupHTTPListener(t, nil, common, orNop(optB))
	return a, b, shared
}

func orNop(f func(*Config)) func(*Config) {
	if f == nil {
		return func(*Config) {}
	}
	return f
}

func routerRecord(t *testing.T, st store.PushStore, uaid string) *store.PushUser {
	t.Helper()
	u, err := st.PushUserGet(context.Background(), uaid)
	require.NoError(t, err)
	return u
}

// TestHandoffToStalledNodeKeepsRecord (issue 20, item 7): a hand-off to a
// live node that answers slowly (its store stalls 3 s while it stores the
// message its user agent did not ack) is waited for, and the node's router
// record stays. Before, the caller gave up after AckWait + 2 s, took the
// live node for dead, cleared its record, and every later send through
// another node was stored with nobody nudged.
func TestHandoffToStalledNodeKeepsRecord(t *testing.T) {
	t.Parallel()
	short := func(c *Config) { c.AckWait = 100 * time.Millisecond }
	a, b, shared := twoNodes(t, nil, short, short)
	c, uaid, _ := a.connected(t)
	ep := a.endpointOf(t, c)
	epB := strings.Replace(ep, a.base, b.base, 1)
	before := routerRecord(t, shared, uaid)
	require.Equal(t, a.s.cfg.NodeID, before.NodeID)

	var stalls atomic.Int64
	a.fault.onSave(func() {
		if stalls.Add(1) == 1 {
			time.Sleep(3 * time.Second) // the stalled database
		}
	})
	done := postAsync(epB, []byte("slow store"), map[string]string{"TTL": "60", "Content-Encoding": "aes128gcm"})
	n := c.readType("notification") // written, not acked: A stores it
	select {
	case status := <-done:
		require.Equal(t, http.StatusCreated, status)
	case <-time.After(handoffTimeout(100 * time.Millisecond)):
		t.Fatal("the send did not finish")
	}
	require.Equal(t, before, routerRecord(t, shared, uaid), "a live node's record is kept")
	stored := b.stored(t, uaid)
	require.Len(t, stored, 1, "stored once, by A")
	c.ack(n["channelID"].(string), n["version"].(string))
	c.sync()
	waitFor(t, "the ack deletes the stored copy", func() bool { return len(b.stored(t, uaid)) == 0 })
}

// failPushTransport fails every hand-off (PUT /push/…) after connecting,
// the way a timeout from a live node does, and passes nudges through.
type failPushTransport struct{ next http.RoundTripper }

func (f failPushTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/push/") {
		return nil, context.DeadlineExceeded
	}
	return f.next.RoundTrip(r)
}

// TestFailedHandoffStillNudges (issue 20, item 7): when a hand-off to a
// live node fails without a dial error, the message is stored, the record
// kept, and the node nudged, so its user agent gets the message now.
// Before, the record was cleared and the message waited for the next
// reconnect.
func TestFailedHandoffStillNudges(t *testing.T) {
	t.Parallel()
	a, b, shared := twoNodes(t, nil, nil, func(c *Config) {
		c.HTTPClient = &http.Client{Transport: failPushTransport{next: http.DefaultTransport}}
	})
	c, uaid, _ := a.connected(t)
	ep := a.endpointOf(t, c)
	epB := strings.Replace(ep, a.base, b.base, 1)
	before := routerRecord(t, shared, uaid)

	resp := b.post(t, epB, sendOpts{ttl: "60", body: []byte("nudged")})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, before, routerRecord(t, shared, uaid))
	n := c.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("nudged")), n["data"])
	c.ack(n["channelID"].(string), n["version"].(string))
	c.sync()
	waitFor(t, "the acked message deleted", func() bool { return len(b.stored(t, uaid)) == 0 })
}

// TestHandoffDialErrorClearsRecord: a node that refuses connections is
// gone; its record is cleared (conditionally) and the message stored.
func TestHandoffDialErrorClearsRecord(t *testing.T) {
	t.Parallel()
	b := setupHTTP(t)
	uaid, chid := newUAID(), newChid()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := NewNodeID("http://" + ln.Addr().String())
	require.NoError(t, ln.Close()) // nothing listens there any more
	require.NoError(t, b.st.PushUserCreate(ctx, &store.PushUserCreateParams{UAID: uaid, NodeID: dead, ConnectedAt: 5, Now: time.Now()}))
	require.NoError(t, b.st.PushChannelAdd(ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid, Now: time.Now()}))
	tok, err := b.s.cfg.Keys.EndpointToken(&Endpoint{UAID: uaid, ChannelID: chid})
	require.NoError(t, err)
	resp := b.post(t, b.base+"/wpush/v1/"+tok, sendOpts{ttl: "60", body: []byte("x")})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Empty(t, routerRecord(t, b.st, uaid).NodeID)
	require.Len(t, b.stored(t, uaid), 1)
}

func TestIsDialError(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = http.Get("http://" + addr + "/")
	require.True(t, isDialError(err), "connection refused: %v", err)
	require.False(t, isDialError(context.DeadlineExceeded))
	require.False(t, isDialError(errors.New("EOF")))
}

// slowListener's connections sleep before each write while slow is set:
// a user agent's socket that drains slowly.
type slowListener struct {
	net.Listener
	slow *atomic.Int64 // nanoseconds each write waits; 0: none
}

func (l slowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return slowConn{Conn: c, slow: l.slow}, nil
}

type slowConn struct {
	net.Conn
	slow *atomic.Int64
}

func (c slowConn) Write(p []byte) (int, error) {
	if d := time.Duration(c.slow.Load()); d > 0 {
		time.Sleep(d) // the simulated slow network, not synchronisation
	}
	return c.Conn.Write(p)
}

// TestHandoffToSlowSocketKeepsRecord (issue 20, item 15b): a user agent
// whose socket takes 3 s to take a frame (under the 10 s write wait) made
// the hand-off to its node time out (AckWait + 2 s) and, alone, cleared
// the live record of item 7. The hand-off now waits out the write.
func TestHandoffToSlowSocketKeepsRecord(t *testing.T) {
	t.Parallel()
	var slow atomic.Int64
	wrap := func(ln net.Listener) net.Listener { return slowListener{Listener: ln, slow: &slow} }
	short := func(c *Config) { c.AckWait = 500 * time.Millisecond }
	a, b, shared := twoNodes(t, wrap, short, short)
	c, uaid, _ := a.connected(t)
	ep := a.endpointOf(t, c)
	epB := strings.Replace(ep, a.base, b.base, 1)
	before := routerRecord(t, shared, uaid)

	slow.Store(int64(3 * time.Second))
	done := postAsync(epB, []byte("slow socket"), map[string]string{"TTL": "60", "Content-Encoding": "aes128gcm"})
	n := c.readType("notification")
	slow.Store(0)
	c.ack(n["channelID"].(string), n["version"].(string))
	require.Equal(t, http.StatusCreated, <-done)
	require.Equal(t, before, routerRecord(t, shared, uaid), "the live record is kept")
}

// TestHandoffTimeoutCoversRemoteWork: the hand-off bound exceeds what the
// remote node may spend before it answers (write, ack wait, store).
func TestHandoffTimeoutCoversRemoteWork(t *testing.T) {
	t.Parallel()
	for _, ack := range []time.Duration{100 * time.Millisecond, DefaultAckWait, 30 * time.Second} {
		require.Greater(t, handoffTimeout(ack), writeWait+ack+storeTimeout)
	}
}

// TestNodesSharingAURLKeepTheirRecords (issue 20, item 8): two nodes that
// were given the same internal URL (--internal-listen :PORT made every
// node http://[::]:PORT) have different node ids, so a send through B to
// a user agent on A is handed to A instead of B taking A's record for its
// own and clearing it.
func TestNodesSharingAURLKeepTheirRecords(t *testing.T) {
	t.Parallel()
	var aURL string
	a, b, shared := twoNodes(t, nil, func(c *Config) {
		aURL = c.NodeID
		c.NodeID = NewNodeID(aURL)
	}, func(c *Config) {
		c.NodeID = NewNodeID(aURL) // the same URL as A's
	})
	c, uaid, _ := a.connected(t)
	ep := a.endpointOf(t, c)
	epB := strings.Replace(ep, a.base, b.base, 1)
	before := routerRecord(t, shared, uaid)
	require.Equal(t, a.s.cfg.NodeID, before.NodeID)

	done := postAsync(epB, []byte("via B"), map[string]string{"TTL": "60", "Content-Encoding": "aes128gcm"})
	n := c.readType("notification")
	c.ack(n["channelID"].(string), n["version"].(string))
	require.Equal(t, http.StatusCreated, <-done)
	require.Equal(t, before, routerRecord(t, shared, uaid))
	require.Empty(t, b.stored(t, uaid))
}

func TestNewNodeID(t *testing.T) {
	t.Parallel()
	id1, id2 := NewNodeID("http://10.0.0.5:8081/"), NewNodeID("http://10.0.0.5:8081")
	require.NotEqual(t, id1, id2)
	require.True(t, strings.HasPrefix(id1, "http://10.0.0.5:8081#"), id1)
	require.Equal(t, "http://10.0.0.5:8081", nodeURL(id1))
	require.Equal(t, "http://10.0.0.5:8081", nodeURL("http://10.0.0.5:8081"), "a record written before node ids had a fragment")
	require.Empty(t, nodeURL(NewNodeID("")), "a node without an internal listener cannot be called")
}

// TestHelloAfterNodeWithClockAhead (issue 20, item 15a): a node whose
// clock ran an hour ahead stamped the record's connected_at in our
// future; the user agent left it (node_id cleared). Its hello here was
// refused "already connected" until our clock caught up; now it connects,
// stamped after the stored connection.
func TestHelloAfterNodeWithClockAhead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	uaid := newUAID()
	ahead := e.clock.Now().Add(time.Hour).UnixMilli()
	require.NoError(t, e.st.PushUserCreate(ctx, &store.PushUserCreateParams{UAID: uaid, NodeID: "http://fast:1#x", ConnectedAt: ahead, Now: e.clock.Now()}))
	ok, err := e.st.PushUserDisconnect(ctx, &store.PushUserDisconnectParams{UAID: uaid, NodeID: "http://fast:1#x", ConnectedAt: ahead})
	require.NoError(t, err)
	require.True(t, ok)

	c := e.dial(t)
	require.Equal(t, uaid, c.hello(uaid, nil)["uaid"])
	u := routerRecord(t, e.st, uaid)
	require.Equal(t, testNode, u.NodeID)
	require.Greater(t, u.ConnectedAt, ahead)

	// A node that still holds it with a newer connection still wins.
	uaid2 := newUAID()
	require.NoError(t, e.st.PushUserCreate(ctx, &store.PushUserCreateParams{UAID: uaid2, NodeID: "http://fast:1#x", ConnectedAt: ahead, Now: e.clock.Now()}))
	c2 := e.dial(t)
	c2.send(map[string]any{"messageType": "hello", "uaid": uaid2})
	c2.expectClose(closeError)
}

// TestRefusedHelloKeepsLocalSession (issue 20, item 15c): a hello for a
// uaid in session here that the store refuses (another node took it over
// between the read and the write, or a store error) ended the session
// here as a ghost before the refusal. The session now stays.
func TestRefusedHelloKeepsLocalSession(t *testing.T) {
	t.Parallel()
	for _, refusal := range []error{herald.ErrConflict, herald.ErrStoreUnavailable} {
		e := setup(t)
		c1, uaid, chid := e.connected(t)
		e.fault.fail("PushUserConnect", refusal)
		c2 := e.dial(t)
		c2.send(map[string]any{"messageType": "hello", "uaid": uaid})
		c2.expectClose(closeError)
		e.fault.fail("PushUserConnect", nil)

		c1.sync() // still open
		require.Equal(t, 1, e.h.Connected())
		res := e.deliverAsync(e.msg(uaid, chid, 60, "still here", ""))
		n := c1.readType("notification")
		c1.ack(chid, n["version"].(string))
		require.Equal(t, Delivered, wait(t, res).out)
	}
}

// TestRouterRecordReasserted (issue 20, item 7): a connected session
// writes its router record again every routerRefresh (10 minutes), so a
// record another node cleared names this node again soon. Before, it was
// rewritten once a day.
func TestRouterRecordReasserted(t *testing.T) {
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
	u := routerRecord(t, e.st, uaid)
	ok, err := e.st.PushUserDisconnect(context.Background(), &store.PushUserDisconnectParams{UAID: uaid, NodeID: u.NodeID, ConnectedAt: u.ConnectedAt})
	require.NoError(t, err)
	require.True(t, ok)
	e.clock.Advance(10 * time.Minute)
	waitFor(t, "the record names this node again", func() bool {
		got, err := e.st.PushUserGet(context.Background(), uaid)
		return err == nil && got.NodeID == testNode && got.ConnectedAt == u.ConnectedAt
	})
}

// TestInternalListenerRefusesReplayedBearer (issue 20, item 15d): the
// internal listener refuses a bearer made more than InternalTokenWindow
// ago (one captured on the wire) and accepts a fresh one.
func TestInternalListenerRefusesReplayedBearer(t *testing.T) {
	t.Parallel()
	e := setupHTTP(t)
	_, uaid, _ := e.connected(t)
	notif := func(tok string) int {
		resp := e.post(t, e.internal+"/notif/"+uaid, sendOpts{method: http.MethodPut, headers: map[string]string{"Authorization": "Bearer " + tok}})
		return resp.StatusCode
	}
	now := e.clock.Now()
	require.Equal(t, http.StatusOK, notif(e.s.cfg.Keys.InternalToken(now)))
	require.Equal(t, http.StatusUnauthorized, notif(e.s.cfg.Keys.InternalToken(now.Add(-2*InternalTokenWindow))))
}

// TestHandoffNotConnectedClearsRecord: a live node that answers "not
// connected here" (here: the record names an earlier process at a node's
// URL, as after a restart, since node ids differ per process) has its
// record cleared, so later sends are stored without a hand-off.
func TestHandoffNotConnectedClearsRecord(t *testing.T) {
	t.Parallel()
	b := setupHTTP(t)
	uaid, chid := newUAID(), newChid()
	ctx := context.Background()
	live := httptest.NewServer(b.s.InternalHandler())
	t.Cleanup(live.Close)
	earlier := NewNodeID(live.URL)
	require.NoError(t, b.st.PushUserCreate(ctx, &store.PushUserCreateParams{UAID: uaid, NodeID: earlier, ConnectedAt: 5, Now: time.Now()}))
	require.NoError(t, b.st.PushChannelAdd(ctx, &store.PushChannelAddParams{UAID: uaid, ChannelID: chid, Now: time.Now()}))
	tok, err := b.s.cfg.Keys.EndpointToken(&Endpoint{UAID: uaid, ChannelID: chid})
	require.NoError(t, err)
	resp := b.post(t, b.base+"/wpush/v1/"+tok, sendOpts{ttl: "60", body: []byte("x")})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Empty(t, routerRecord(t, b.st, uaid).NodeID)
	require.Len(t, b.stored(t, uaid), 1)
}

// flakyNotifTransport fails every hand-off (PUT /push/…) after connecting,
// and the first fails nudges (PUT /notif/…), as a node too busy to answer
// in time does.
type flakyNotifTransport struct {
	next  http.RoundTripper
	fails *atomic.Int64
}

func (f flakyNotifTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/push/") {
		return nil, context.DeadlineExceeded
	}
	if strings.HasPrefix(r.URL.Path, "/notif/") && f.fails.Add(-1) >= 0 {
		return nil, context.DeadlineExceeded
	}
	return f.next.RoundTrip(r)
}

// TestFailedNudgeRetried (issue 25's cluster bench: messages stored for a
// connected user agent under a reconnect storm): a nudge that fails is
// tried again, so the stored message reaches the connected user agent
// within seconds. Before, a failed nudge was only counted and the message
// waited for the user agent's next reconnect.
func TestFailedNudgeRetried(t *testing.T) {
	t.Parallel()
	fails := &atomic.Int64{}
	fails.Store(2)
	a, b, _ := twoNodes(t, nil, nil, func(c *Config) {
		c.HTTPClient = &http.Client{Transport: flakyNotifTransport{next: http.DefaultTransport, fails: fails}}
	})
	c, uaid, _ := a.connected(t)
	epB := strings.Replace(a.endpointOf(t, c), a.base, b.base, 1)

	resp := b.post(t, epB, sendOpts{ttl: "60", body: []byte("retried")})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	n := c.readType("notification") // after retries at 1 s and 2 s
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("retried")), n["data"])
	require.Equal(t, int64(-1), fails.Load(), "two nudges failed, the third passed")
	c.ack(n["channelID"].(string), n["version"].(string))
	c.sync()
	waitFor(t, "the acked message deleted", func() bool { return len(b.stored(t, uaid)) == 0 })
}

// TestUnackedOnCloseReachesSessionElsewhere: a session that ends with a
// message unacked stores it and nudges the session the router record names
// now, on another node: the user agent reconnected there (and read its
// empty storage) before this socket's end was seen. Before, only this
// node's hub was nudged and the message waited for the next reconnect.
func TestUnackedOnCloseReachesSessionElsewhere(t *testing.T) {
	t.Parallel()
	a, b, shared := twoNodes(t, nil, nil, nil)
	c1, uaid, chid := a.connected(t)
	res := a.deliverAsync(a.msg(uaid, chid, 60, "in flight", ""))
	c1.readType("notification") // written to A's session, never acked

	c2 := b.dial(t)
	c2.hello(uaid, nil)
	c2.sync()
	require.Equal(t, b.s.cfg.NodeID, routerRecord(t, shared, uaid).NodeID)

	require.NoError(t, c1.ws.Close())
	r := wait(t, res)
	require.NoError(t, r.err)
	require.Equal(t, Stored, r.out)
	n := c2.readType("notification")
	require.Equal(t, base64.RawURLEncoding.EncodeToString([]byte("in flight")), n["data"])
}

// The retry schedule covers minutes, not the 31 s it covered before (issue
// 25's five-node storms starved a node for 79–245 s), and a user agent has
// one waiting retry however many of its nudges fail.
func TestNudgeRetriesPerUserAgentForMinutes(t *testing.T) {
	t.Parallel()
	var total time.Duration
	for attempt := 1; attempt < nudgeAttempts; attempt++ {
		total += nudgeDelay(attempt)
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second},
		[]time.Duration{nudgeDelay(1), nudgeDelay(2), nudgeDelay(3), nudgeDelay(4), nudgeDelay(5), nudgeDelay(6)})
	require.Greater(t, total, 5*time.Minute)

	e := setup(t)
	uaid := newUAID()
	e.s.retryNudge(uaid, 1)
	e.s.retryNudge(uaid, 7) // another failed nudge of the same user agent
	e.s.retryNudge(newUAID(), 3)
	e.s.nudges.mu.Lock()
	require.Equal(t, 2, e.s.nudges.pending[uaid], "the later failure keeps the earlier schedule's next attempt")
	require.Len(t, e.s.nudges.pending, 2, "one waiting retry per user agent")
	e.s.nudges.mu.Unlock()
}
