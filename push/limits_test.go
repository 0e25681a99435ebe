package push

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
