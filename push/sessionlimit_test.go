package push

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// limitEnv serves a push Server's Wrap (what herald serve mounts) with
// the session caps of cfg.
func limitEnv(t *testing.T, maxConns, perIP int) string {
	t.Helper()
	keys, err := ParseKeys(GenerateKey())
	require.NoError(t, err)
	s, err := New(Config{
		Store: newTestStore(t), Keys: keys, EndpointURL: "https://push.example.test", NodeID: testNode,
		MaxConns: maxConns, MaxConnsPerIP: perIP,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Wrap(http.NotFoundHandler()))
	t.Cleanup(func() {
		_ = s.Close()
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// dialFrom opens a push socket to url from the local address ip.
func dialFrom(t *testing.T, url, ip string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, NetDialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)},
	}).DialContext}
	ws, resp, err := d.Dial(url, nil)
	if err == nil {
		t.Cleanup(func() { _ = ws.Close() })
	}
	return ws, resp, err
}

// requireRefused requires a dial answered 503 before the upgrade.
func requireRefused(t *testing.T, url, ip string) {
	t.Helper()
	_, resp, err := dialFrom(t, url, ip)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
}

// Over MaxConns a WebSocket upgrade (on / and /push/ws) is 503, before
// any session starts; a closed session gives its slot back.
func TestSessionCapGlobal(t *testing.T) {
	t.Parallel()
	url := limitEnv(t, 2, 0)
	a, _, err := dialFrom(t, url+"/", "127.0.0.1")
	require.NoError(t, err)
	_, _, err = dialFrom(t, url+"/push/ws", "127.0.0.2")
	require.NoError(t, err)
	requireRefused(t, url+"/", "127.0.0.3")
	requireRefused(t, url+"/push/ws", "127.0.0.1")

	require.NoError(t, a.Close())
	waitFor(t, "the closed session's slot released", func() bool {
		ws, _, err := dialFrom(t, url+"/", "127.0.0.3")
		if err != nil {
			return false
		}
		_ = ws.Close()
		return true
	})
}

// Over MaxConnsPerIP one address is refused while others still connect.
func TestSessionCapPerIP(t *testing.T) {
	t.Parallel()
	url := limitEnv(t, 0, 2)
	for range 2 {
		_, _, err := dialFrom(t, url+"/", "127.0.0.1")
		require.NoError(t, err)
	}
	requireRefused(t, url+"/", "127.0.0.1")
	requireRefused(t, url+"/push/ws", "127.0.0.1")
	_, _, err := dialFrom(t, url+"/", "127.0.0.2")
	require.NoError(t, err)
}

// A refused upgrade (not a WebSocket request) takes no slot.
func TestSessionCapRefusedUpgradeReleases(t *testing.T) {
	t.Parallel()
	url := "http" + strings.TrimPrefix(limitEnv(t, 1, 0), "ws")
	for range 3 {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url+"/push/ws", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}
	_, _, err := dialFrom(t, strings.Replace(url, "http", "ws", 1)+"/", "127.0.0.1")
	require.NoError(t, err)
}

// IPv6 clients count by their /64; IPv4-mapped addresses as IPv4.
func TestClientKey(t *testing.T) {
	t.Parallel()
	key := func(remote string) netip.Addr { return clientKey(&http.Request{RemoteAddr: remote}) }
	require.Equal(t, key("[2001:db8:1:2::1]:443"), key("[2001:db8:1:2:ffff::9]:80"))
	require.NotEqual(t, key("[2001:db8:1:2::1]:443"), key("[2001:db8:1:3::1]:443"))
	require.Equal(t, netip.MustParseAddr("192.0.2.1"), key("[::ffff:192.0.2.1]:1"))
	require.Equal(t, netip.MustParseAddr("192.0.2.1"), key("192.0.2.1:1"))
}
