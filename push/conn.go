package push

// This file holds the session itself: the conn struct and its lifecycle
// (serve, close, teardown) and the one way frames are written. What a
// session does in each phase is in the conn_*.go files beside it.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald/store"
)

// conn is one user agent's WebSocket session. Its only goroutine is the
// read loop (the upgrading request's goroutine); frames are written by
// whoever has one to send, under wmu with a write deadline; keepalive is a
// timer. While idle a session holds this struct, gorilla's connection and
// its 1 KiB read buffer, and the read loop's stack: no channels, no writer
// goroutine, no write buffer.
type conn struct {
	h  *hub
	ws *websocket.Conn
	// addr is the client's address as the session caps count it
	// (clientKey): the register limit of Limits.RegisterIPRate is kept
	// by it.
	addr netip.Addr

	wmu sync.Mutex // serialises text frames

	// Set by hello, then read-only.
	uaid        string
	connectedAt int64 // ms, the router record's optimistic lock

	// Touched by the read loop only.
	newUser  bool      // not in the store until the first register
	lastPing time.Time // last protocol ping answered

	mu sync.Mutex // guards everything below
	// state is the session's lifecycle (conn_state.go): whether hello was
	// answered, and whether it is closing or torn down.
	state sessionState
	// reset: the uaid was dropped (msg limit); nothing more is written for
	// it. Not a state of its own: it is set only in stateReady, the session
	// starts closing at once, and teardown still needs it (the dropped
	// uaid's messages are not stored or deleted).
	reset bool
	// check is the storage check (conn_state.go).
	check checkState
	// backlogRead counts the stored messages read in this session that
	// were created before its hello (autopush's sent_from_storage, less
	// what arrived meanwhile): more than MsgLimit resets the uaid. A
	// message stored while the session runs (unacked within AckWait) is
	// not backlog, so a connected, acking user agent is never reset.
	backlogRead int
	// direct are the written, unacked direct messages (TTL > 0).
	direct []*pendingDirect
	// batch is the storage batch in flight: the next is read once all of
	// it is acked.
	batch []*storedEntry
	// Keepalive: one timer, armed for the next ping (or broadcast), or
	// for the pong deadline while awaitingPong. awaitingPong is the
	// keepalive's two-state machine on its own: it is read only while the
	// session is not closing, and closing stops the timer.
	timer        *time.Timer
	awaitingPong bool
	// Broadcast subscriptions: id → version the user agent was last told,
	// and the registry generation compared last. nil until subscribed.
	subs map[string]string
	bgen uint64
	// channels is the channel cache the endpoint routes by
	// (channelcache.go).
	channels channelCache
	// touched is when the router record was last written (hello, then
	// every routerRefresh on a ping tick).
	touched time.Time
}

// serve runs the session: handshake, then the read loop, then teardown.
func (c *conn) serve() {
	defer func() {
		if p := recover(); p != nil {
			c.h.log.Error("push: session panic", "panic", p)
			c.closeWith(closeError, "internal error")
			c.finish(nil)
			c.mu.Lock()
			ready := c.state.answered()
			c.mu.Unlock()
			if ready {
				c.teardown()
			} else {
				c.h.unregister(c)
			}
		}
	}()
	c.ws.SetReadLimit(maxFrameBytes)
	if !c.handshake() {
		return
	}
	c.startKeepalive()
	c.checkLoop()
	err := c.readLoop()
	c.finish(err)
	c.teardown()
}

// isClosed reports whether the session is being torn down.
func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateClosed
}

// fail closes the session for err: a *frameError's code, else 1011.
func (c *conn) fail(err error) error {
	code, reason := closeError, "internal error"
	var fe *frameError
	if errors.As(err, &fe) {
		code, reason = fe.Code, fe.Reason
	}
	if code == closeError {
		c.h.log.Warn("push: closing session", "uaid_hash", uaidLog(c.uaid), "err", err)
	}
	c.closeWith(code, reason)
	return err
}

// write sends one text frame.
func (c *conn) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(frame)
}

// writeLocked is write for a caller holding wmu.
func (c *conn) writeLocked(frame []byte) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
	err := c.ws.WriteMessage(websocket.TextMessage, frame)
	if err != nil {
		// The read loop sees the socket fail and tears the session down.
		_ = c.ws.Close()
	}
	return err
}

// closeWith starts closing the session from any goroutine: the close frame
// is sent and the read loop is given closeGrace to see the user agent's
// answer. Only the first call counts.
func (c *conn) closeWith(code int, reason string) {
	c.mu.Lock()
	if !c.state.markClosing() {
		c.mu.Unlock()
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	deadline := time.Now().Add(closeGrace)
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), deadline)
	_ = c.ws.SetReadDeadline(deadline)
}

// finish ends the socket after the read loop stopped with err: if this side
// sent a close frame, what the user agent still sends is read and
// discarded until it closes too (bounded by closeGrace and
// closeDrainBytes), so the close frame is not lost to a TCP reset.
func (c *conn) finish(err error) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		// The user agent closed; gorilla answered its close frame.
		_ = c.ws.Close()
		return
	}
	if errors.Is(err, websocket.ErrReadLimit) {
		c.mu.Lock()
		c.state.markClosing() // gorilla sent 1009
		c.mu.Unlock()
	}
	c.mu.Lock()
	closing := c.state.closing()
	c.mu.Unlock()
	if closing {
		nc := c.ws.UnderlyingConn()
		_ = nc.SetReadDeadline(time.Now().Add(closeGrace))
		_, _ = io.Copy(io.Discard, io.LimitReader(nc, closeDrainBytes))
	}
	_ = c.ws.Close()
}

// teardown runs once the socket is gone: unacked direct messages are
// stored, the acked part of an unfinished batch deleted, and the router
// record cleared if it still names this connection.
func (c *conn) teardown() {
	h := c.h
	c.mu.Lock()
	if !c.state.markClosed() {
		c.mu.Unlock()
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	var save []*pendingDirect
	for _, pd := range c.direct {
		if pd.state == directPending {
			pd.state = directClosing
			save = append(save, pd)
		}
	}
	var acked []string
	for _, e := range c.batch {
		if e.acked && e.topic == "" {
			acked = append(acked, e.id)
		}
	}
	c.batch = nil
	reset := c.reset
	c.mu.Unlock()
	h.unregister(c)

	if len(save) > 0 {
		outcome, err := NotConnected, error(nil)
		if !reset {
			outcome, err = c.saveOnClose(save)
		}
		for _, pd := range save {
			pd.outcome, pd.err = outcome, err
			close(pd.done)
		}
	}
	if len(acked) > 0 && !reset {
		if err := c.deleteMessages(acked); err != nil {
			h.log.Warn("push: deleting acked messages", "uaid_hash", uaidLog(c.uaid), "err", err)
		}
	}
	if !reset && !c.newUser {
		c.disconnectRouter()
	}
	h.obs.ObserveConnected(-1)
}

// disconnectRouter clears the router record if it still names this
// connection.
func (c *conn) disconnectRouter() {
	ctx, cancel := storeCtx()
	defer cancel()
	if _, err := c.h.store.PushUserDisconnect(ctx, &store.PushUserDisconnectParams{
		UAID: c.uaid, NodeID: c.h.nodeID, ConnectedAt: c.connectedAt,
	}); err != nil {
		c.h.log.Warn("push: clearing router record", "uaid_hash", uaidLog(c.uaid), "err", err)
	}
}

// uaidLog is how a uaid appears in logs (as uaid_hash): the first 8 hex
// digits of its SHA-256, enough to follow one user agent through the logs.
// The uaid itself is the bearer credential of its sessions (whoever sends
// it in hello receives its messages), so it is never logged.
func uaidLog(uaid string) string {
	sum := sha256.Sum256([]byte(uaid))
	return hex.EncodeToString(sum[:4])
}
