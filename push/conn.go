package push

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald"
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
	// ready: hello was answered; direct deliveries may be written.
	ready bool
	// closing: a close frame was sent (or is being); closed: the read
	// loop ended and the session is being torn down.
	closing, closed bool
	// reset: the uaid was dropped (msg limit); nothing more is written for
	// it.
	reset bool
	// checking: a storage check (list and send) is running; recheck: a
	// nudge came meanwhile, so list again before stopping.
	checking, recheck bool
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
	// for the pong deadline while awaitingPong.
	timer        *time.Timer
	awaitingPong bool
	// Broadcast subscriptions: id → version the user agent was last told,
	// and the registry generation compared last. nil until subscribed.
	subs map[string]string
	bgen uint64
	// channels caches channels known registered in this session (chid →
	// key hash, nil for none) so the endpoint can route to this session
	// without a store read: filled by register and by the endpoint's
	// route reads, emptied by unregister. nil until first used; at most
	// maxKnownChannels.
	channels map[string][]byte
	// touched is when the router record was last written (hello, then
	// every routerRefresh on a ping tick).
	touched time.Time
	// chanGen counts forgetChannel calls: a route read from the store is
	// remembered only if no register or unregister ran since the read
	// began (it may have seen the channel as it was before).
	chanGen uint64
}

// maxKnownChannels bounds a session's channel cache (a browser has a few
// dozen subscriptions at most; beyond the bound routes are read from the
// store).
const maxKnownChannels = 256

// rememberChannel records that chid is registered with keyHash.
func (c *conn) rememberChannel(chid string, keyHash []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.channels == nil {
		c.channels = map[string][]byte{}
	}
	if _, ok := c.channels[chid]; ok || len(c.channels) < maxKnownChannels {
		c.channels[chid] = keyHash
	}
}

func (c *conn) forgetChannel(chid string) {
	c.mu.Lock()
	delete(c.channels, chid)
	c.chanGen++
	c.mu.Unlock()
}

// learnChannel is rememberChannel for a route read from the store that
// began at generation gen.
func (c *conn) learnChannel(gen uint64, chid string, keyHash []byte) {
	c.mu.Lock()
	stale := c.chanGen != gen
	c.mu.Unlock()
	if !stale {
		c.rememberChannel(chid, keyHash)
	}
}

// knownChannel reports whether chid is known registered, with its key
// hash, while the session can take deliveries; gen is the channel
// generation for learnChannel when it is not.
func (c *conn) knownChannel(chid string) (keyHash []byte, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.closing || c.closed || c.reset {
		return nil, false, c.chanGen
	}
	kh, ok := c.channels[chid]
	return kh, ok, c.chanGen
}

// pendingDirect is a direct message written to the user agent and not
// yet acked.
type pendingDirect struct {
	m       *store.PushMessage
	version string
	state   directState
	// ackedWhileSaving: the ack came while Deliver was storing it; Deliver
	// deletes the stored copy.
	ackedWhileSaving bool
	// done is closed when the outcome is decided by someone other than
	// the waiting Deliver (ack, or socket close); outcome/err are set
	// before.
	done    chan struct{}
	outcome DeliverOutcome
	err     error
}

type directState uint8

const (
	directPending directState = iota // written, waiting for the ack
	directSaving                     // AckWait passed; Deliver is storing it
	directStored                     // stored; the ack deletes it
	directClosing                    // the closing session is storing it
	directAcked                      // acked before AckWait: Delivered
)

// storedEntry is one message of the storage batch in flight.
type storedEntry struct {
	id, chid, topic string
	version         string
	acked           bool
}

// serve runs the session: handshake, then the read loop, then teardown.
func (c *conn) serve() {
	defer func() {
		if p := recover(); p != nil {
			c.h.log.Error("push: session panic", "panic", p)
			c.closeWith(closeError, "internal error")
			c.finish(nil)
			c.mu.Lock()
			ready := c.ready
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

// handshake reads and answers hello. On failure the socket is closed and
// false returned.
func (c *conn) handshake() bool {
	_ = c.ws.SetReadDeadline(time.Now().Add(c.h.handshakeTimeout))
	mt, data, err := c.ws.ReadMessage()
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.closeWith(closeError, "handshake timeout")
		}
		c.finish(err)
		return false
	}
	if mt != websocket.TextMessage {
		err = &frameError{Code: closeUnsupported, Reason: "expected text", Err: errBinaryFrame}
	} else {
		var msg *clientMessage
		msg, err = decodeClientMessage(data)
		switch {
		case err != nil:
		case msg.Type != msgHello:
			err = protocolError(`expected messageType "hello"`, nil)
		default:
			_ = c.ws.SetReadDeadline(time.Time{})
			err = c.hello(msg)
		}
	}
	if err != nil {
		c.finish(c.fail(err))
		return false
	}
	return true
}

// errAlreadyConnected: a newer connection of the uaid exists elsewhere.
var errAlreadyConnected = errors.New("push: uaid already connected to another node")

// hello identifies the user agent: an existing uaid reconnects (router
// record updated, conditionally), anything else gets a new uaid that is
// stored at its first register. The conn is in the hub before the router
// record names this node, so a nudge racing the connect finds it.
func (c *conn) hello(msg *clientMessage) error {
	h := c.h
	now := h.now()
	c.connectedAt = now.UnixMilli()
	c.mu.Lock()
	c.touched = now
	c.mu.Unlock()
	existing := false
	if uaid, ok := normalizeUAID(msg.UAID); ok {
		ctx, cancel := storeCtx()
		u, err := h.store.PushUserGet(ctx, uaid)
		cancel()
		switch {
		case errors.Is(err, herald.ErrNotFound):
		case err != nil:
			return &frameError{Code: closeError, Reason: "store error", Err: err}
		case u.NodeID != "" && u.ConnectedAt > c.connectedAt:
			return &frameError{Code: closeError, Reason: "already connected", Err: errAlreadyConnected}
		default:
			if u.ConnectedAt >= c.connectedAt {
				// No node holds the user agent, but its last connection
				// was stamped later than our clock's now (a node whose
				// clock is ahead): connect after it, or the optimistic
				// lock would refuse the user agent everywhere until our
				// clock caught up.
				c.connectedAt = u.ConnectedAt + 1
			}
			c.uaid = uaid
			old := h.register(c)
			ctx, cancel := storeCtx()
			err = h.store.PushUserConnect(ctx, &store.PushUserConnectParams{
				UAID: uaid, NodeID: h.nodeID, ConnectedAt: c.connectedAt, Now: now,
			})
			cancel()
			if err != nil {
				// Refused: a session of the uaid here stays the uaid's.
				h.restore(c, old)
			}
			switch {
			case err == nil:
				existing = true
				h.ghost(old)
			case errors.Is(err, herald.ErrConflict):
				return &frameError{Code: closeError, Reason: "already connected", Err: errAlreadyConnected}
			case errors.Is(err, herald.ErrNotFound):
				// Dropped between the read and the update: a new uaid.
			default:
				return &frameError{Code: closeError, Reason: "store error", Err: err}
			}
		}
	}
	if !existing {
		c.uaid = newUAID()
		c.newUser = true
		h.ghost(h.register(c))
	}
	select {
	case <-h.bcReady:
	case <-time.After(storeTimeout):
	}
	c.mu.Lock()
	subs, reply := h.bc.subscribe(nil, &c.bgen, msg.Broadcasts)
	c.subs = subs
	c.mu.Unlock()
	if err := c.write(encodeHello(c.uaid, reply)); err != nil {
		h.unregister(c)
		c.disconnectRouter()
		return err
	}
	c.mu.Lock()
	c.ready = true
	if c.newUser {
		// Nothing can be stored for a uaid that is not in the store.
		c.checking = false
	}
	c.mu.Unlock()
	h.obs.ObserveConnected(1)
	return nil
}

// isClosed reports whether the session is being torn down.
func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// newUAID returns a random version-4 UUID as 32 hex digits.
func newUAID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// readLoop handles client frames until the socket fails or closes.
func (c *conn) readLoop() error {
	for {
		mt, data, err := c.ws.ReadMessage()
		if err != nil {
			return err
		}
		if mt != websocket.TextMessage {
			return c.fail(&frameError{Code: closeUnsupported, Reason: "expected text", Err: errBinaryFrame})
		}
		msg, err := decodeClientMessage(data)
		if err != nil {
			return c.fail(err)
		}
		if err := c.handle(msg); err != nil {
			return c.fail(err)
		}
	}
}

// pauseReads stops reading this session's frames for d (at most
// maxRefusedPause, until the hub closes): after a refused register the
// next one could only be refused too, and a client that sends it at once
// anyway would make the node answer as fast as the round trip allows
// (measured: 12,000 refusals in 5 s from four sessions, the largest share
// of the node's CPU under TestResourceExhaustion's attack). Unread frames
// wait in the socket's buffers, and a client that fills them blocks on its
// own writes. Deliveries to the session are written by other goroutines
// and do not wait; its acks wait with its other frames.
func (c *conn) pauseReads(d time.Duration) {
	t := time.NewTimer(min(d, maxRefusedPause))
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.h.stop:
	}
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

func (c *conn) handle(msg *clientMessage) error {
	switch msg.Type {
	case msgHello:
		return protocolError("Already Hello'd", nil)
	case msgRegister:
		return c.register(msg)
	case msgUnregister:
		return c.unregisterChannel(msg)
	case msgAck:
		return c.ack(msg.Updates)
	case msgNack:
		c.h.obs.ObserveNack(metricCode(msg.Code, 301, 303, 0))
		return nil
	case msgPing:
		return c.ping()
	case msgBroadcastSubscribe:
		c.mu.Lock()
		var reply map[string]any
		c.subs, reply = c.h.bc.subscribe(c.subs, &c.bgen, msg.Broadcasts)
		c.mu.Unlock()
		if len(reply) == 0 {
			return nil
		}
		return c.write(encodeBroadcast(reply))
	}
	return &frameError{Code: closeUnsupported, Reason: "unknown messageType"}
}

// metricCode maps a client's code to a metric label: codes in [lo, hi]
// as they are, absent as def, anything else 0.
func metricCode(code, lo, hi, def int) int {
	switch {
	case code == 0:
		return def
	case code >= lo && code <= hi:
		return code
	default:
		return 0
	}
}

// errExcessivePing closes a user agent that pings more often than the
// protocol allows.
var errExcessivePing = errors.New("push: client pings too often")

func (c *conn) ping() error {
	now := c.h.now()
	if !c.lastPing.IsZero() && now.Sub(c.lastPing) < c.h.minPingInterval {
		return &frameError{Code: closeError, Reason: "excessive ping", Err: errExcessivePing}
	}
	c.lastPing = now
	return c.write(pingReply)
}

// Register reply statuses beyond autopush's 200, 400 and 500 (a user
// agent takes any status but 200 as a failed subscription; the session
// stays open): 429 when the user agent, its client address or the node
// registers faster than Limits.RegisterRate, RegisterIPRate or
// RegisterNodeRate allow, 409 when it has Limits.MaxChannels already.
// Neither changes anything.
const (
	registerTooMany     = 429
	registerChannelsCap = 409
)

// register answers a register: a new endpoint for the channel (v2 when the
// user agent gave an application server key). A channel id that is not a
// lower-case dashed UUID closes the session; a key that does not decode is
// answered with status 400 and changes nothing.
func (c *conn) register(msg *clientMessage) error {
	chid := msg.ChannelID
	if !isCanonicalUUID(chid) {
		return protocolError("invalid channelID", nil)
	}
	if ok, wait := c.h.registerLimit.allow(c.uaid, c.addr, c.h.now()); !ok {
		if err := c.write(encodeRegister(chid, registerTooMany, "")); err != nil {
			return err
		}
		c.pauseReads(wait)
		return nil
	}
	ep := &Endpoint{UAID: c.uaid, ChannelID: chid}
	if msg.Key != nil {
		raw, ok := decodeAppServerKey(*msg.Key)
		if !ok {
			return c.write(encodeRegister(chid, 400, "Failed to generate endpoint"))
		}
		sum := sha256.Sum256(raw)
		ep.KeyHash = sum[:]
	}
	token, err := c.h.keys.EndpointToken(ep)
	if err != nil {
		c.h.log.Error("push: endpoint token", "err", err)
		return c.write(encodeRegister(chid, 500, ""))
	}
	// Forget it first: while it is being written, its key may change.
	c.forgetChannel(chid)
	if err := c.storeChannel(ep); errors.Is(err, store.ErrPushChannelLimit) {
		return c.write(encodeRegister(chid, registerChannelsCap, ""))
	} else if err != nil {
		c.h.log.Error("push: register", "uaid_hash", uaidLog(c.uaid), "err", err)
		return c.write(encodeRegister(chid, 500, ""))
	}
	c.rememberChannel(chid, ep.KeyHash)
	version := "v1"
	if ep.KeyHash != nil {
		version = "v2"
	}
	return c.write(encodeRegister(chid, 200, c.h.endpoint+"/wpush/"+version+"/"+token))
}

// storeChannel writes the channel, and first the user agent when this is
// its first register.
func (c *conn) storeChannel(ep *Endpoint) error {
	h := c.h
	ctx, cancel := storeCtx()
	defer cancel()
	now := h.now()
	if c.newUser {
		err := h.store.PushUserCreate(ctx, &store.PushUserCreateParams{
			UAID: c.uaid, NodeID: h.nodeID, ConnectedAt: c.connectedAt, Now: now,
		})
		if err != nil {
			return fmt.Errorf("error creating user agent: %w", err)
		}
		c.newUser = false
	}
	return h.store.PushChannelAdd(ctx, &store.PushChannelAddParams{
		UAID: c.uaid, ChannelID: ep.ChannelID, KeyHash: ep.KeyHash, Now: now, MaxChannels: h.maxChannels,
	})
}

// unregisterChannel answers an unregister (idempotent); the store deletes
// the channel's stored messages. Messages of the channel still awaited
// from the user agent no longer hold up the storage batch.
func (c *conn) unregisterChannel(msg *clientMessage) error {
	chid := msg.ChannelID
	// Before the store: no message may be routed to it from the cache
	// once the unregister is under way.
	c.forgetChannel(chid)
	status := 200
	if !c.newUser {
		ctx, cancel := storeCtx()
		_, err := c.h.store.PushChannelRemove(ctx, &store.PushChannelRemoveParams{UAID: c.uaid, ChannelID: chid})
		cancel()
		if err != nil {
			c.h.log.Error("push: unregister", "uaid_hash", uaidLog(c.uaid), "err", err)
			status = 500
		}
	}
	if status == 200 {
		c.mu.Lock()
		for _, e := range c.batch {
			if e.chid == chid {
				e.acked = true
			}
		}
		c.direct = slices.DeleteFunc(c.direct, func(pd *pendingDirect) bool {
			return pd.m.ChannelID == chid && pd.state == directStored
		})
		c.mu.Unlock()
	}
	if err := c.write(encodeUnregister(chid, status)); err != nil {
		return err
	}
	return c.afterAck()
}

// ack handles an ack: direct messages wake their Deliver (or, already
// stored, are deleted); stored ones are marked, topic messages deleted at
// once; a fully acked batch is deleted in one call and the next read.
// Unknown versions are ignored.
func (c *conn) ack(updates []ackUpdate) error {
	var del []string
	c.mu.Lock()
	for _, u := range updates {
		if i := slices.IndexFunc(c.direct, func(pd *pendingDirect) bool {
			return pd.version == u.Version && pd.m.ChannelID == u.ChannelID
		}); i >= 0 {
			pd := c.direct[i]
			switch pd.state {
			case directPending:
				c.direct = slices.Delete(c.direct, i, i+1)
				pd.state, pd.outcome = directAcked, Delivered
				close(pd.done)
			case directSaving:
				pd.ackedWhileSaving = true
			case directStored:
				c.direct = slices.Delete(c.direct, i, i+1)
				del = append(del, pd.m.ID)
			}
		}
		for _, e := range c.batch {
			if !e.acked && e.version == u.Version && e.chid == u.ChannelID {
				e.acked = true
				if e.topic != "" {
					del = append(del, e.id)
				}
			}
		}
		c.h.obs.ObserveAck(metricCode(u.Code, 100, 102, 100))
	}
	c.mu.Unlock()
	if len(del) > 0 {
		if err := c.deleteMessages(del); err != nil {
			return &frameError{Code: closeError, Reason: "store error", Err: err}
		}
	}
	return c.afterAck()
}

// afterAck deletes a fully acked storage batch and reads the next.
func (c *conn) afterAck() error {
	c.mu.Lock()
	if c.batch == nil || slices.ContainsFunc(c.batch, func(e *storedEntry) bool { return !e.acked }) {
		c.mu.Unlock()
		return nil
	}
	var ids []string
	for _, e := range c.batch {
		if e.topic == "" {
			ids = append(ids, e.id)
		}
	}
	c.batch = nil
	c.checking = true
	c.mu.Unlock()
	if err := c.deleteMessages(ids); err != nil {
		c.mu.Lock()
		c.checking = false
		c.mu.Unlock()
		return &frameError{Code: closeError, Reason: "store error", Err: err}
	}
	c.checkLoop()
	return nil
}

func (c *conn) deleteMessages(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := storeCtx()
	defer cancel()
	_, err := c.h.store.PushMessageDelete(ctx, &store.PushMessageDeleteParams{UAID: c.uaid, IDs: ids})
	return err
}

// notify is a check-storage nudge: it starts a check unless one is running
// or a batch is in flight (then the running work lists again when done).
func (c *conn) notify() bool {
	c.mu.Lock()
	if c.closed || c.closing || c.reset {
		c.mu.Unlock()
		return false
	}
	if c.checking || c.batch != nil {
		c.recheck = true
		c.mu.Unlock()
		return true
	}
	c.checking = true
	// The session holds a count on wg until teardown, which marks closed
	// under mu: this Add cannot race hub.Close's Wait at zero.
	c.h.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.h.wg.Done()
		c.checkLoop()
	}()
	return true
}

// checkLoop reads stored messages (topic ones first, BatchSize at a time)
// and sends them as the batch in flight; with nothing stored it ends the
// check. The caller has set checking.
func (c *conn) checkLoop() {
	h := c.h
	for {
		c.mu.Lock()
		if !c.checking {
			c.mu.Unlock()
			return
		}
		if c.closing || c.closed {
			c.checking = false
			c.mu.Unlock()
			return
		}
		c.recheck = false
		c.mu.Unlock()

		ctx, cancel := storeCtx()
		msgs, err := h.store.PushMessageList(ctx, &store.PushMessageListParams{UAID: c.uaid, Now: h.now(), Limit: BatchSize})
		cancel()
		if err != nil {
			c.mu.Lock()
			c.checking = false
			c.mu.Unlock()
			_ = c.fail(&frameError{Code: closeError, Reason: "store error", Err: fmt.Errorf("error listing messages: %w", err)})
			return
		}

		c.mu.Lock()
		if c.closing || c.closed {
			c.checking = false
			c.mu.Unlock()
			return
		}
		if len(msgs) == 0 {
			if c.recheck {
				c.mu.Unlock()
				continue
			}
			c.checking = false
			c.mu.Unlock()
			return
		}
		for _, m := range msgs {
			if m.CreatedAt.UnixMilli() <= c.connectedAt {
				c.backlogRead++
			}
		}
		if c.backlogRead > h.msgLimit {
			c.reset = true
			c.checking = false
			c.mu.Unlock()
			c.resetUAID()
			return
		}
		batch := make([]*storedEntry, 0, len(msgs))
		frames := make([][]byte, 0, len(msgs))
		for _, m := range msgs {
			e := &storedEntry{id: m.ID, chid: m.ChannelID, topic: m.Topic}
			// A direct message stored after AckWait is still awaited under
			// the version it was written with: do not write it twice.
			if i := slices.IndexFunc(c.direct, func(pd *pendingDirect) bool { return pd.m.ID == m.ID }); i >= 0 {
				e.version = c.direct[i].version
			} else {
				v, err := h.keys.MessageID(&MessageRef{UAID: c.uaid, ChannelID: m.ChannelID, ID: m.ID, Topic: m.Topic})
				if err != nil {
					c.checking = false
					c.mu.Unlock()
					_ = c.fail(fmt.Errorf("error making message id: %w", err))
					return
				}
				e.version = v
				frames = append(frames, encodeNotification(m, v))
			}
			batch = append(batch, e)
		}
		c.batch = batch
		c.checking = false
		c.mu.Unlock()
		for _, f := range frames {
			if err := c.write(f); err != nil {
				return
			}
		}
		return
	}
}

// resetUAID drops a user agent that read more than MsgLimit stored
// messages of its backlog at connect (autopush's msg_limit): it must get a
// new uaid and re-register its channels.
func (c *conn) resetUAID() {
	ctx, cancel := storeCtx()
	err := c.h.store.PushUserDelete(ctx, c.uaid)
	cancel()
	if err != nil {
		_ = c.fail(&frameError{Code: closeError, Reason: "store error", Err: err})
		return
	}
	c.closeWith(closeUAIDReset, "uaid reset")
}

// deliver writes a direct message and waits for its outcome (Deliver).
func (c *conn) deliver(ctx context.Context, m *store.PushMessage, version string) (DeliverOutcome, error) {
	frame := encodeNotification(m, version)
	var pd *pendingDirect
	c.mu.Lock()
	if !c.ready || c.closing || c.closed || c.reset {
		c.mu.Unlock()
		return NotConnected, nil
	}
	if m.TTL > 0 && len(c.direct) >= ClientChannelCapacity {
		c.mu.Unlock()
		return QueueFull, nil
	}
	if m.TTL > 0 {
		// Tracked before it is written, so an ack cannot outrun it.
		pd = &pendingDirect{m: m, version: version, done: make(chan struct{})}
		c.direct = append(c.direct, pd)
	}
	c.mu.Unlock()
	if err := c.write(frame); err != nil {
		if pd == nil {
			return NotConnected, nil
		}
		c.mu.Lock()
		if pd.state == directPending {
			c.direct = slices.DeleteFunc(c.direct, func(x *pendingDirect) bool { return x == pd })
			c.mu.Unlock()
			return NotConnected, nil
		}
		c.mu.Unlock()
		<-pd.done
		return pd.outcome, pd.err
	}
	if !m.CreatedAt.IsZero() {
		c.h.obs.ObserveDeliveryLatency(c.h.now().Sub(m.CreatedAt).Seconds())
	}
	if pd == nil {
		return Delivered, nil
	}
	t := time.NewTimer(c.h.ackWait)
	defer t.Stop()
	select {
	case <-pd.done:
		return pd.outcome, pd.err
	case <-ctx.Done():
		return NotConnected, ctx.Err()
	case <-t.C:
		return c.storeUnacked(pd)
	}
}

// storeUnacked stores a direct message whose ack did not come within
// AckWait. It stays awaited: the ack that comes later deletes it.
func (c *conn) storeUnacked(pd *pendingDirect) (DeliverOutcome, error) {
	c.mu.Lock()
	if pd.state != directPending {
		c.mu.Unlock()
		<-pd.done
		return pd.outcome, pd.err
	}
	pd.state = directSaving
	c.mu.Unlock()

	ctx, cancel := storeCtx()
	_, err := c.h.store.PushMessageSave(ctx, &store.PushMessageSaveParams{UAID: c.uaid, Messages: []*store.PushMessage{pd.m}})
	cancel()

	c.mu.Lock()
	remove := func() { c.direct = slices.DeleteFunc(c.direct, func(x *pendingDirect) bool { return x == pd }) }
	switch {
	case err != nil:
		// The caller stores it (or answers the sender with an error).
		remove()
		c.mu.Unlock()
		c.h.log.Warn("push: storing unacked direct message", "uaid_hash", uaidLog(c.uaid), "err", err)
		return NotConnected, nil
	case pd.ackedWhileSaving:
		remove()
		c.mu.Unlock()
		if err := c.deleteMessages([]string{pd.m.ID}); err != nil {
			c.h.log.Warn("push: deleting acked message", "uaid_hash", uaidLog(c.uaid), "err", err)
		}
		return Delivered, nil
	case c.closed:
		remove()
		c.mu.Unlock()
		return Stored, nil
	default:
		// Awaited by id and version only: the body is in the store now.
		pd.state = directStored
		pd.m = &store.PushMessage{ID: pd.m.ID, UAID: pd.m.UAID, ChannelID: pd.m.ChannelID, Topic: pd.m.Topic}
		c.mu.Unlock()
		return Stored, nil
	}
}

// write sends one text frame.
func (c *conn) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
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
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
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
		c.closing = true // gorilla sent 1009
		c.mu.Unlock()
	}
	c.mu.Lock()
	closing := c.closing
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
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
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

// saveOnClose stores the unacked direct messages of a closing session that
// have not expired (an expired one is as good as stored and expired). A
// newer session of the uaid on this node is nudged to read them.
func (c *conn) saveOnClose(save []*pendingDirect) (DeliverOutcome, error) {
	now := c.h.now()
	msgs := make([]*store.PushMessage, 0, len(save))
	for _, pd := range save {
		if pd.m.ExpiresAt.IsZero() || now.Before(pd.m.ExpiresAt) {
			msgs = append(msgs, pd.m)
		}
	}
	if len(msgs) == 0 {
		return Stored, nil
	}
	ctx, cancel := storeCtx()
	_, err := c.h.store.PushMessageSave(ctx, &store.PushMessageSaveParams{UAID: c.uaid, Messages: msgs})
	cancel()
	if err != nil {
		c.h.log.Error("push: storing unacked direct messages", "uaid_hash", uaidLog(c.uaid), "count", len(msgs), "err", err)
		// A waiting Deliver answers NotConnected: its caller stores it.
		return NotConnected, nil
	}
	c.h.Notify(c.uaid)
	return Stored, nil
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

// startKeepalive arms the ping timer. A pong re-arms it for the next
// interval; a tick with a pending broadcast delta sends the delta instead
// of a ping (autopush's rule), and a tick while a pong is awaited closes.
func (c *conn) startKeepalive() {
	c.ws.SetPongHandler(func(string) error {
		c.mu.Lock()
		if c.awaitingPong && !c.closing {
			c.awaitingPong = false
			c.timer.Reset(c.h.pingInterval)
		}
		c.mu.Unlock()
		return nil
	})
	c.mu.Lock()
	if !c.closing {
		c.timer = time.AfterFunc(c.h.pingInterval, c.tick)
	}
	c.mu.Unlock()
}

func (c *conn) tick() {
	c.mu.Lock()
	if c.closing || c.closed {
		c.mu.Unlock()
		return
	}
	if now := c.h.now(); now.Sub(c.touched) >= c.h.routerRefresh {
		c.touched = now
		go c.refreshLastConnect(now)
	}
	if c.awaitingPong {
		c.mu.Unlock()
		c.closeWith(closeError, "pong timeout")
		return
	}
	delta := c.h.bc.delta(c.subs, &c.bgen)
	if delta != nil {
		c.timer.Reset(c.h.pingInterval)
	} else {
		c.awaitingPong = true
		c.timer.Reset(c.h.pingTimeout)
	}
	c.mu.Unlock()
	if delta != nil {
		_ = c.write(encodeBroadcast(delta))
		return
	}
	_ = c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait))
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
	ctx, cancel := storeCtx()
	defer cancel()
	err := c.h.store.PushUserConnect(ctx, &store.PushUserConnectParams{
		UAID: c.uaid, NodeID: c.h.nodeID, ConnectedAt: c.connectedAt, Now: now,
	})
	if err != nil && !errors.Is(err, herald.ErrNotFound) && !errors.Is(err, herald.ErrConflict) {
		c.h.log.Warn("push: refreshing last_connect", "err", err)
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
