package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// The derived caps follow the formula of listen.go.
func TestResolveConnLimits(t *testing.T) {
	t.Parallel()
	c := &config{Workers: 64, PushMaxConnsPerIP: 64}
	l := resolveConnLimits(c, 20000)
	require.Equal(t, connLimits{fileLimit: 20000, reserve: 256, public: 19744, push: 19232, pushPerIP: 64}, l)

	// ulimit -n 256: half the files stay for the store and deliveries.
	l = resolveConnLimits(c, 256)
	require.Equal(t, connLimits{fileLimit: 256, reserve: 128, public: 128, push: 96, pushPerIP: 64}, l)

	// --admin-listen takes its share out of the budget.
	ca := &config{Workers: 64, AdminListen: "127.0.0.1:0"}
	l = resolveConnLimits(ca, 20000)
	require.Equal(t, 1024, l.admin)
	require.Equal(t, 19744-1024, l.public)
	require.Equal(t, l.public+l.admin+l.reserve, 20000)

	// Explicit flags win; an unknown limit is taken as 8192.
	ce := &config{Workers: 64, MaxConns: 1000, PushMaxConns: 10, AdminListen: "x:1", AdminMaxConns: 7}
	l = resolveConnLimits(ce, 0)
	require.Equal(t, connLimits{fileLimit: 0, reserve: 256, public: 1000, admin: 7, push: 10}, l)
}

// At its cap a listener accepts nothing more until a connection closes,
// and listeners drawing on the same slots share the cap.
func TestLimitListener(t *testing.T) {
	t.Parallel()
	slots := make(connSlots, 2)
	listen := func() *limitListener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		l := newLimitListener(ln, slots)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a, b := listen(), listen()
	accepted := make(chan net.Conn, 10)
	for _, l := range []*limitListener{a, b} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
	}
	for _, l := range []*limitListener{a, b, b} {
		c, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
	}
	first := <-accepted
	<-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted over the cap of two")
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, first.Close())
	_ = first.Close() // a second Close gives nothing back twice
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was not accepted after one closed")
	}
	require.Len(t, slots, 2)
}

// serveOnly answers the routes of other listeners 404 in the API's
// format; health checks answer everywhere.
func TestServeOnly(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	pushOnly, adminOnly := serveOnly(ok, classPush), serveOnly(ok, classAdmin)
	do := func(h http.Handler, method, path string, upgrade bool) int {
		r := httptest.NewRequest(method, path, nil)
		if upgrade {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		method, path string
		upgrade      bool
		push, admin  int
	}{
		{"GET", "/", true, 418, 404},
		{"GET", "/push/ws", false, 418, 404},
		{"POST", "/wpush/v1/x", false, 418, 404},
		{"DELETE", "/m/x", false, 418, 404},
		{"GET", "/", false, 404, 418},
		{"GET", "/v1/stats", false, 404, 418},
		{"GET", "/ui/", false, 404, 418},
		{"GET", "/portal/", false, 404, 418},
		{"GET", "/metrics", false, 404, 418},
		{"GET", "/openapi.json", false, 404, 418},
		{"GET", "/healthz", false, 418, 418},
		{"GET", "/readyz", false, 418, 418},
	} {
		require.Equal(t, tc.push, do(pushOnly, tc.method, tc.path, tc.upgrade), "push listener: %s %s", tc.method, tc.path)
		require.Equal(t, tc.admin, do(adminOnly, tc.method, tc.path, tc.upgrade), "admin listener: %s %s", tc.method, tc.path)
	}
}

// herald serve with --push-listen and --admin-listen: each listener serves
// its routes and answers the others' 404; the push session cap per
// address and the body read deadline are in force.
func TestServeListenerSplit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	main, pushAddr, admin := freeAddr(t), freeAddr(t), freeAddr(t)
	startNode(t, bin, main, append(storeArgs(t, "sqlite"), "--dev", "--api-token", "split-token",
		"--push-listen", pushAddr, "--admin-listen", admin,
		"--push-max-conns-per-ip", "1", "--read-timeout", "500ms")...)

	get := func(addr, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer split-token")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/v1/stats", "/ui/", "/metrics", "/openapi.json"} {
		code, _ := get(admin, path)
		require.Equal(t, http.StatusOK, code, "admin listener: %s", path)
		for _, other := range []string{pushAddr, main} {
			code, body := get(other, path)
			require.Equal(t, http.StatusNotFound, code, "%s on %s", path, other)
			require.Contains(t, body, `"not_found"`)
		}
	}
	for _, addr := range []string{main, pushAddr, admin} {
		code, _ := get(addr, "/healthz")
		require.Equal(t, http.StatusOK, code, addr)
	}

	// Push: sessions on the push listener only.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+pushAddr+"/", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	require.NoError(t, ws.WriteJSON(map[string]any{"messageType": "hello", "use_webpush": true}))
	var hello map[string]any
	require.NoError(t, ws.ReadJSON(&hello))
	require.Equal(t, "hello", hello["messageType"])
	for _, other := range []string{admin, main} {
		_, resp, err := websocket.DefaultDialer.Dial("ws://"+other+"/", nil)
		require.ErrorIs(t, err, websocket.ErrBadHandshake)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, other)
	}
	// A second session from the same address is over --push-max-conns-per-ip.
	_, resp, err := websocket.DefaultDialer.Dial("ws://"+pushAddr+"/", nil)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	// Endpoints answer on the push listener (an unknown token: errno 102).
	resp, err = http.Post("http://"+pushAddr+"/wpush/v1/nope", "application/octet-stream", nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(body), `"errno":102`)
	code, body2 := get(admin, "/wpush/v1/nope")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body2, `"not_found"`)

	// A body trickling in is cut after --read-timeout.
	conn, err := net.Dial("tcp", admin)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	start := time.Now()
	_, err = io.WriteString(conn, "POST /v1/events HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer split-token\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&e))
	require.Equal(t, http.StatusRequestTimeout, res.StatusCode)
	require.Equal(t, "request_timeout", e.Error.Code)
	require.Less(t, time.Since(start), 5*time.Second)
}

// The reproduction: under `ulimit -n 256`, idle push sockets past
// the derived cap (96 there) are refused with 503 while /healthz, a
// publish and its webhook delivery keep working.
func TestServeFileLimitKeepsRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	addr := freeAddr(t)
	logs := &syncBuffer{}
	cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, bin, "serve", "--listen", addr,
		"--data-dir", t.TempDir(), "--dev", "--api-token", "fd-token",
		"--push-max-conns-per-ip", "0", "--push-handshake-timeout", "1m")
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "herald did not become ready; logs:\n%s", logs)

	opened, refused := 0, 0
	for range 200 {
		ws, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/", nil)
		if err != nil {
			require.ErrorIs(t, err, websocket.ErrBadHandshake, "logs:\n%s", logs)
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			refused++
			continue
		}
		t.Cleanup(func() { _ = ws.Close() })
		opened++
	}
	require.Equal(t, 96, opened, "logs:\n%s", logs)
	require.Equal(t, 104, refused)

	recv := newReceiver(t)
	code, _, err := apiCall(context.Background(), addr, "fd-token", http.MethodPost, "/v1/subscriptions",
		map[string]any{"url": recv.URL + "/hook", "event_types": []string{"fd.test"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code)
	for range 20 {
		code, b, err := apiCall(context.Background(), addr, "fd-token", http.MethodPost, "/v1/events",
			map[string]any{"type": "fd.test", "data": map[string]any{}})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, code, "%s", b)
	}
	require.Eventually(t, func() bool { return recv.hits.Load() >= 20 }, 10*time.Second, 20*time.Millisecond,
		"webhooks not delivered; logs:\n%s", logs)
	resp, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, logs.String(), "too many open files")
}
