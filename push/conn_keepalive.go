package push

// This file holds a session's keepalive: the WebSocket ping tick, the
// pong deadline, pending broadcast deltas sent in a ping's place, and the
// periodic refresh of the router record.

import (
	"errors"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// startKeepalive arms the ping tick (dlKeepalive). A pong re-arms it for
// the next interval; a tick with a pending broadcast delta sends the delta
// instead of a ping (autopush's rule), and a tick while a pong is awaited
// closes.
func (c *conn) startKeepalive() {
	c.mu.Lock()
	if !c.state.closing() {
		sessions().timers.arm(c, dlKeepalive, c.h.pingInterval)
	}
	c.mu.Unlock()
}

// onPong handles the user agent's pong.
func (c *conn) onPong() {
	c.mu.Lock()
	if c.awaitingPong && !c.state.closing() {
		c.awaitingPong = false
		sessions().timers.arm(c, dlKeepalive, c.h.pingInterval)
	}
	c.mu.Unlock()
}

// tick is the keepalive deadline: a ping (or a broadcast delta), or the
// close when the last ping's pong did not come.
func (c *conn) tick() {
	c.mu.Lock()
	if c.state.closing() {
		c.mu.Unlock()
		return
	}
	if now := c.h.now(); time.Duration(now.UnixNano()-c.touched) >= c.h.routerRefresh {
		c.touched = now.UnixNano()
		go c.refreshLastConnect(now)
	}
	if c.awaitingPong {
		c.mu.Unlock()
		c.closeWith(closeError, "pong timeout")
		return
	}
	delta := c.h.bc.delta(c.subs, &c.bgen)
	if delta != nil {
		sessions().timers.arm(c, dlKeepalive, c.h.pingInterval)
	} else {
		c.awaitingPong = true
		sessions().timers.arm(c, dlKeepalive, c.h.pingTimeout)
	}
	c.mu.Unlock()
	if delta != nil {
		_ = c.write(encodeBroadcast(delta))
		return
	}
	_ = c.writeFrame(opPing, nil, time.Now().Add(writeWait))
}

// defaultRouterRefresh is how often, on a ping tick, a session re-asserts
// its router record: node_id and last_connect are written again under its
// own connected_at. The idle sweep (--push-idle-expiry, 60 days) never
// drops a connected user agent, and a record another node cleared (it
// could not connect to this node for a while) names this node again
// within this time. One conditional update per session per 10 minutes
// (about 170 a second for 100,000 sessions).
const defaultRouterRefresh = 10 * time.Minute

// refreshLastConnect re-asserts the router record with this session's own
// connected_at (a no-op for the optimistic lock). A user agent not yet in
// the store (no register) or taken over elsewhere is left alone.
func (c *conn) refreshLastConnect(now time.Time) {
	r, err := c.h.connects.do(&store.PushUserConnectParams{
		UAID: c.uaid, NodeID: c.h.nodeID, ConnectedAt: c.connectedAt, Now: now,
	})
	if err == nil {
		err = r.Err
	}
	if err != nil && !errors.Is(err, herald.ErrNotFound) && !errors.Is(err, herald.ErrConflict) {
		c.h.log.Warn("push: refreshing last_connect", "err", err)
	}
}
