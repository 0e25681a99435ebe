package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/push"
)

// uaClient is a minimal autopush user agent over a real WebSocket.
type uaClient struct {
	t    *testing.T
	ws   *websocket.Conn
	uaid string
}

func dialUA(t *testing.T, addr, uaid string) *uaClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	c := &uaClient{t: t, ws: ws}
	hello := map[string]any{"messageType": "hello", "use_webpush": true}
	if uaid != "" {
		hello["uaid"] = uaid
	}
	c.send(hello)
	r := c.read(10 * time.Second)
	require.Equal(t, "hello", r["messageType"], r)
	c.uaid = r["uaid"].(string)
	return c
}

func (c *uaClient) send(v any) {
	c.t.Helper()
	require.NoError(c.t, c.ws.WriteJSON(v))
}

// read returns the next frame, or nil at the deadline.
func (c *uaClient) read(d time.Duration) map[string]any {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(d))
	_, b, err := c.ws.ReadMessage()
	if err != nil {
		return nil
	}
	var m map[string]any
	require.NoError(c.t, json.Unmarshal(b, &m), string(b))
	return m
}

func (c *uaClient) register() string {
	c.t.Helper()
	c.send(map[string]any{"messageType": "register", "channelID": "5a1e9f2c-0000-4000-8000-00000000000" + fmt.Sprint(len(c.uaid)%10)})
	r := c.read(10 * time.Second)
	require.Equal(c.t, "register", r["messageType"], r)
	require.EqualValues(c.t, 200, r["status"], r)
	return r["pushEndpoint"].(string)
}

func (c *uaClient) ack(n map[string]any) {
	c.t.Helper()
	c.send(map[string]any{"messageType": "ack", "updates": []map[string]any{{"channelID": n["channelID"], "version": n["version"], "code": 100}}})
}

func payloadOf(t *testing.T, n map[string]any) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(n["data"].(string))
	require.NoError(t, err)
	return string(b)
}

func pushSend(endpoint, body string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("TTL", "600")
	req.Header.Set("Content-Encoding", "aes128gcm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// TestPushTwoNodes runs two herald processes on one PostgreSQL with the same
// push keys: a user agent connected to node A receives what is sent to node
// B's endpoint (hand-off over A's internal listener); messages sent while it
// is away are stored and delivered when it reconnects to B; and kill -9 of
// A while messages stream to it loses none that B acknowledged with 201.
func TestPushTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	schema := testdb.PostgresSchema(t)
	bin := heraldBinary(t)
	keys := push.GenerateKey()
	common := []string{"--dev", "--api-token", "nodes-token", "--push-crypto-keys", keys, "--push-ack-wait", "300ms",
		"--database-url", testdb.URL() + sep(testdb.URL()) + "search_path=" + schema}
	addrA, addrB := freeAddr(t), freeAddr(t)
	a := startNode(t, bin, addrA, append(common, "--internal-listen", freeAddr(t))...)
	startNode(t, bin, addrB, append(common, "--internal-listen", freeAddr(t))...)

	ua := dialUA(t, addrA, "")
	epA := ua.register()
	require.True(t, strings.HasPrefix(epA, "http://"+addrA+"/wpush/v1/"), epA)
	epB := strings.Replace(epA, addrA, addrB, 1)

	// 1. Hand-off: sent to B, received on A.
	done := make(chan int, 1)
	go func() { st, _ := pushSend(epB, "via B"); done <- st }()
	n := ua.read(10 * time.Second)
	require.NotNil(t, n, "no notification through node A")
	require.Equal(t, "via B", payloadOf(t, n))
	ua.ack(n)
	require.Equal(t, http.StatusCreated, <-done)

	// 2. Away: stored through B, received on reconnecting to B.
	require.NoError(t, ua.ws.Close())
	uaid := ua.uaid
	waitFor(t, 10*time.Second, func() (bool, string) {
		st, err := pushSend(epB, "probe-away")
		return err == nil && st == http.StatusCreated, fmt.Sprint(st, err)
	}, func(last string) string { return "send while away: " + last })
	for i := range 3 {
		st, err := pushSend(epB, fmt.Sprintf("away-%d", i))
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, st)
	}
	ub := dialUA(t, addrB, uaid)
	require.Equal(t, uaid, ub.uaid)
	got := map[string]bool{}
	for len(got) < 4 {
		n := ub.read(10 * time.Second)
		require.NotNil(t, n, "stored messages not all delivered on B; got %v", got)
		if n["messageType"] != "notification" {
			continue
		}
		got[payloadOf(t, n)] = true
		ub.ack(n)
	}
	require.True(t, got["probe-away"] && got["away-0"] && got["away-1"] && got["away-2"], "%v", got)
	require.NoError(t, ub.ws.Close())

	// 3. kill -9 of A mid-stream: the user agent is on A and does not ack,
	// so A stores each message after --push-ack-wait; senders post to B.
	// Every message B answered 201 for must come through after the user
	// agent reconnects to B.
	ua2 := dialUA(t, addrA, uaid)
	require.Equal(t, uaid, ua2.uaid)
	var mu sync.Mutex
	accepted := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("kill-%d-%d", w, i)
				if st, err := pushSend(epB, body); err == nil && st == http.StatusCreated {
					mu.Lock()
					accepted[body] = true
					mu.Unlock()
				}
			}
		}()
	}
	// Let some messages reach A unacked, then kill it.
	for seen := 0; seen < 6; {
		if n := ua2.read(10 * time.Second); n != nil && n["messageType"] == "notification" {
			seen++
		} else if n == nil {
			t.Fatal("no notifications on A before the kill")
		}
	}
	a.kill9(t)
	// Senders keep going while A is dead (B stores), then stop.
	waitFor(t, 10*time.Second, func() (bool, string) {
		st, err := pushSend(epB, "after-kill")
		return err == nil && st == http.StatusCreated, fmt.Sprint(st, err)
	}, func(last string) string { return "send after kill: " + last })
	close(stop)
	wg.Wait()
	mu.Lock()
	want := len(accepted)
	mu.Unlock()
	require.Positive(t, want)

	ub2 := dialUA(t, addrB, uaid)
	require.Equal(t, uaid, ub2.uaid, "the user agent keeps its uaid")
	received := map[string]bool{}
	for {
		missing := 0
		mu.Lock()
		for body := range accepted {
			if !received[body] {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		n := ub2.read(15 * time.Second)
		require.NotNil(t, n, "%d of %d acknowledged messages never arrived after the kill", missing, want)
		if n["messageType"] != "notification" {
			continue
		}
		received[payloadOf(t, n)] = true
		ub2.ack(n)
	}
	t.Logf("kill -9: %d messages acknowledged with 201, all received after reconnecting to B", want)
}

// TestPushBroadcastAdminAPI: an operator sets a broadcast version with the
// admin API; a connected user agent subscribed to it receives the change
// on its next ping tick, and the API refuses bad input and anonymous
// callers.
func TestPushBroadcastAdminAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	addr := freeAddr(t)
	startNode(t, bin, addr, "--data-dir", t.TempDir(), "--dev", "--api-token", "bc-token", "--push-ping-interval", "200ms")
	ctx := t.Context()

	ua := dialUA(t, addr, "")
	ua.send(map[string]any{"messageType": "broadcast_subscribe", "broadcasts": map[string]string{"remote-settings/monitor_changes": `"0"`}})
	r := ua.read(5 * time.Second)
	require.Equal(t, "broadcast", r["messageType"], r)
	require.Equal(t, map[string]any{"errors": map[string]any{"remote-settings/monitor_changes": "Broadcast not found"}}, r["broadcasts"])

	st, body, err := apiCall(ctx, addr, "bc-token", http.MethodPut, "/v1/push/broadcasts/remote-settings/monitor_changes", map[string]string{"version": `"42"`})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st, string(body))
	r = ua.read(5 * time.Second)
	require.Equal(t, "broadcast", r["messageType"], r)
	require.Equal(t, map[string]any{"remote-settings/monitor_changes": `"42"`}, r["broadcasts"])

	st, body, err = apiCall(ctx, addr, "bc-token", http.MethodGet, "/v1/push/broadcasts", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st)
	require.JSONEq(t, `{"broadcasts":{"remote-settings/monitor_changes":"\"42\""}}`, string(body))

	for _, c := range []struct {
		token, path string
		body        any
		status      int
	}{
		{"wrong", "/v1/push/broadcasts/x", map[string]string{"version": "1"}, http.StatusUnauthorized},
		{"bc-token", "/v1/push/broadcasts/bad%20id", map[string]string{"version": "1"}, http.StatusBadRequest},
		{"bc-token", "/v1/push/broadcasts/x", map[string]string{}, http.StatusBadRequest},
		{"bc-token", "/v1/push/broadcasts/x", map[string]string{"version": "a\nb"}, http.StatusBadRequest},
		{"bc-token", "/v1/push/broadcasts/x", map[string]any{"version": "1", "extra": true}, http.StatusBadRequest},
	} {
		st, body, err := apiCall(ctx, addr, c.token, http.MethodPut, c.path, c.body)
		require.NoError(t, err)
		require.Equal(t, c.status, st, "%s %v: %s", c.path, c.body, body)
	}
}
