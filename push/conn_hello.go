package push

// This file holds the unidentified session: reading the first frame,
// which must be hello, and identifying the user agent (a returning uaid or
// a new one) before anything else is read or written.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// handshake answers the first frame, which must be hello; then the
// session's keepalive and first storage check start. An error closes the
// session.
func (c *conn) handshake(op byte, data []byte) error {
	if op != opText {
		return &frameError{Code: closeUnsupported, Reason: "expected text", Err: errBinaryFrame}
	}
	msg, err := decodeClientMessage(data)
	if err != nil {
		return err
	}
	if msg.Type != msgHello {
		return protocolError(`expected messageType "hello"`, nil)
	}
	sessions().timers.disarm(c, dlHandshake)
	if err := c.hello(msg); err != nil {
		return err
	}
	c.read = readMessages
	c.startKeepalive()
	c.checkLoop()
	return nil
}

// errAlreadyConnected: a newer connection of the uaid exists elsewhere.
var errAlreadyConnected = errors.New("push: uaid already connected to another node")

// hello identifies the user agent: an existing uaid reconnects (router
// record updated, conditionally), anything else gets a new uaid that is
// stored at its first register. The conn is in the hub before the router
// record names this node, so a nudge racing the connect finds it.
//
// The session is stamped with its connection's upgrade time (set by the
// hub), not this hello's: under a reconnect storm a node may read a hello
// seconds after the user agent gave up on it and connected again
// elsewhere, and a stamp taken now would be the newer one, take the
// router record from the live session, and leave the user agent's
// messages stored where nothing tells it (issue 25's cluster bench lost
// 21 and 2,396 messages this way). With the upgrade's time the abandoned
// hello is the older one and is refused as "already connected".
func (c *conn) hello(msg *clientMessage) error {
	h := c.h
	now := h.now()
	if c.connectedAt == 0 {
		c.connectedAt = now.UnixMilli()
	}
	c.mu.Lock()
	c.touched = now.UnixNano()
	c.mu.Unlock()
	existing := false
	if uaid, ok := normalizeUAID(msg.UAID); ok {
		c.uaid = uaid
		err := c.connectStored()
		switch {
		case err == nil:
			existing = true
		case errors.Is(err, herald.ErrConflict):
			return &frameError{Code: closeError, Reason: "already connected", Err: errAlreadyConnected}
		case errors.Is(err, herald.ErrNotFound):
			// Not stored (never registered, or dropped): a new uaid.
		default:
			return &frameError{Code: closeError, Reason: "store error", Err: err}
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
	// Ready and answered in one step under wmu. Once the router record
	// names this node, another node may hand a message over at any time;
	// a session found not ready answers NotConnected, and that node then
	// clears the record while the user agent, which has its answer, stays
	// connected here with nothing routed to it. Marked ready first, a
	// delivery waits on wmu and its frame follows the answer.
	c.wmu.Lock()
	c.mu.Lock()
	c.state.markAnswered()
	if c.newUser {
		// Nothing can be stored for a uaid that is not in the store.
		c.check = checkIdle
	}
	c.mu.Unlock()
	// Counted as connected from here: a failed write ends the session,
	// and its teardown (the session is answered) leaves the hub, clears
	// the router record and counts it out.
	h.obs.ObserveConnected(1)
	err := c.writeFrameLocked(opText, encodeHello(c.uaid, reply), time.Now().Add(writeWait))
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	if h.afterHelloWrite != nil {
		h.afterHelloWrite(c.uaid)
	}
	return nil
}

// connectStored takes the router record of c.uaid for this session: in
// the hub first, then in the store, in one conditional update gathered
// with other sessions' (h.connects); a refusal carries the record it lost
// to, which tells the cases apart (issue 25: no read per hello, and one
// statement for many hellos in a reconnect storm):
//   - a node holds the user agent with a newer stamp: ErrConflict, the
//     user agent is connected elsewhere;
//   - no node holds it, or one holds the same stamp (another session of
//     the same millisecond), and the stored stamp is not older than ours
//     (a node whose clock is ahead stamped it): connect after it, or the
//     optimistic lock would refuse the user agent everywhere until our
//     clock caught up;
//   - not stored: ErrNotFound.
//
// On success a session of the uaid here before is closed (ghost); on
// failure it is the uaid's again.
func (c *conn) connectStored() error {
	h := c.h
	for retried := false; ; retried = true {
		old, ok := h.registerNewer(c) // stamps c after a session here
		if !ok {
			return herald.ErrConflict
		}
		r, err := h.connects.do(&store.PushUserConnectParams{
			UAID: c.uaid, NodeID: h.nodeID, ConnectedAt: c.connectedAt, Now: h.now(), Newer: true,
		})
		if err == nil {
			err = r.Err
		}
		if err == nil {
			h.ghost(old)
			return nil
		}
		h.restore(c, old)
		if !errors.Is(err, herald.ErrConflict) || retried {
			return err
		}
		if r.NodeID != "" && r.ConnectedAt > c.connectedAt {
			return herald.ErrConflict
		}
		c.connectedAt = max(c.connectedAt, r.ConnectedAt+1)
	}
}

// newUAID returns a random version-4 UUID as 32 hex digits.
func newUAID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}
