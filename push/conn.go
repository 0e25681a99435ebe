package push

// This file holds the session itself: the conn struct and its lifecycle
// (start, run, close, end, teardown) and the one way frames are written. What a
// session does in each phase is in the conn_*.go files beside it.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/store"
)

// conn is one user agent's WebSocket session. It has no goroutine of its
// own (ADR 0027): the poller schedules it when its socket is readable, the
// timer heap when one of its deadlines passes, and a worker of the pool
// runs it (run), one worker at a time. Frames are written by whoever has
// one to send, under wmu with a write deadline. While idle a session holds
// this struct and its socket: no goroutine, no read or write buffer, no
// timer of its own.
type conn struct {
	h  *hub
	nc net.Conn
	// addr is the client's address as the session caps count it
	// (clientKey): the register limit of Limits.RegisterIPRate is kept
	// by it.
	addr netip.Addr

	wmu sync.Mutex // serialises frames
	// wdone: the close frame went out (wdoneClose) or a write failed
	// (wdoneFailed); every later write fails at once. Under wmu.
	wdone uint8

	// Set by hello, then read-only.
	uaid        string
	connectedAt int64 // ms, the router record's optimistic lock

	// Touched by run only (one worker at a time). The fields are laid
	// out so the struct fits the 320-byte size class (ADR 0027).
	lastPing int64 // last protocol ping answered, Unix ns (0: none)
	// rd is the frame reader's state while a frame or message is
	// incomplete; nil between frames.
	rd  *frameReader
	pfd pollFD          // the polled socket (poll_linux.go)
	br  *blockingReader // or its reader goroutine, when not polled
	// read is where the reading side is (readState).
	read    readState
	newUser bool // not in the store until the first register
	// paused: reads wait for dlResume (pauseReads); armed: a readiness
	// event is asked for; frameDue: dlFrame is set.
	paused, armed, frameDue bool
	drained                 int32 // bytes discarded while draining

	// events are the events the session is scheduled for (readiness.go).
	events atomic.Uint32
	// Guarded by the timer heap's lock: the session's place on the heap
	// (-1: not on it) and its deadlines.
	tIdx      int32
	deadlines [numDeadlines]int64

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
	backlogRead int32
	// inflight is what the session awaits acks for (conn_notify.go).
	inflight *inflight
	// awaitingPong is the keepalive's two-state machine (dlKeepalive is
	// the next ping tick, or the pong deadline while it is set): it is read
	// only while the session is not closing.
	awaitingPong bool
	// Broadcast subscriptions: id → version the user agent was last told,
	// and the registry generation compared last. nil until subscribed.
	subs map[string]string
	bgen uint64
	// channels is the channel cache the endpoint routes by
	// (channelcache.go).
	channels channelCache
	// touched is when the router record was last written, Unix ns (hello,
	// then every routerRefresh on a ping tick).
	touched int64
}

// readState is where a session's reading is.
type readState uint8

const (
	readHello    readState = iota // the first frame must be hello
	readMessages                  // client messages are handled
	// readDraining: the session closed on an error of its own; what the
	// user agent still sends is discarded (up to closeDrainBytes, until
	// closeGrace) so the close frame is not lost to a TCP reset.
	readDraining
	readEnded // the socket is closed
)

// start begins a session on its upgraded socket: polled when it has a
// file descriptor, else read on a goroutine of its own.
func (c *conn) start() {
	rt := sessions()
	if rt.poll == nil || !rt.poll.attach(c) {
		c.br = newBlockingReader(c)
	}
	rt.timers.arm(c, dlHandshake, c.h.handshakeTimeout)
	c.schedule(evWake) // a worker asks for the first readiness event
}

// run does what the session is scheduled for, on a worker.
func (c *conn) run() {
	defer func() {
		if p := recover(); p != nil {
			c.h.log.Error("push: session panic", "panic", p)
			c.closeWith(closeError, "internal error")
			c.end()
		}
	}()
	for {
		ev := c.takeEvents()
		if ev == 0 {
			return
		}
		if c.read == readEnded {
			continue
		}
		if ev&evRead != 0 {
			c.armed = false
		}
		if ev&evAbort != 0 {
			c.end()
			continue
		}
		if ev&(evTimer|evWake) != 0 {
			c.onTimers()
		}
		if ev&evRead != 0 && c.read != readEnded && !c.paused {
			c.onReadable()
		}
		if c.read != readEnded && !c.paused && !c.armed {
			c.armed = true
			if c.br != nil {
				c.br.arm()
			} else if err := sessions().poll.arm(c); err != nil {
				c.end()
			}
		}
	}
}

// onTimers handles the deadlines that passed, and a close begun elsewhere
// while reads were paused.
func (c *conn) onTimers() {
	due := sessions().timers.expired(c)
	if due&(1<<dlGrace) != 0 {
		c.end()
		return
	}
	// dlHandshake is dlKeepalive's slot: hello ends the one and starts
	// the other.
	if due&(1<<dlHandshake) != 0 && c.read == readHello {
		c.closeWith(closeError, "handshake timeout")
		c.drain()
	}
	if due&(1<<dlFrame) != 0 {
		c.frameDue = false
		if c.read == readMessages && !c.paused && c.rd != nil {
			c.closeWith(closeError, "frame timeout")
			c.drain()
		}
	}
	if due&(1<<dlKeepalive) != 0 && c.read == readMessages {
		c.tick()
	}
	if c.paused && (due&(1<<dlResume) != 0 || c.isClosing()) {
		c.paused = false
		c.consume(nil)
	}
}

// onReadable reads what the socket holds into a pooled buffer and
// consumes it.
func (c *conn) onReadable() {
	bp := readBufferPool.Get().(*[]byte)
	var n int
	var err error
	if c.br != nil {
		n, err = c.br.read(*bp)
	} else {
		n, err = sessions().poll.read(c, *bp)
	}
	if n > 0 {
		c.consume((*bp)[:n])
	}
	readBufferPool.Put(bp)
	if err != nil && c.read != readEnded {
		// The user agent closed the socket, or it failed.
		c.end()
	}
}

// consume reads the frames in data (after what was kept incomplete).
func (c *conn) consume(data []byte) {
	if c.read == readDraining {
		c.drained += int32(len(data))
		if c.drained > closeDrainBytes {
			c.end()
		}
		return
	}
	if c.read == readEnded {
		return
	}
	// The reader's state lives on the stack while it reads, and on the
	// heap only while something is incomplete.
	var rd frameReader
	if c.rd != nil {
		rd = *c.rd
	}
	if err := rd.feed(data, maxFrameBytes, c.onFrame); err != nil {
		_ = c.fail(err)
		c.drain()
	}
	if c.read != readMessages && c.read != readHello {
		c.rd = nil
		return
	}
	switch {
	case !rd.pending():
		c.rd = nil
	default:
		if c.rd == nil {
			c.rd = new(frameReader)
		}
		*c.rd = rd
	}
	// A frame begun must be complete within HandshakeTimeout (before
	// hello, the handshake deadline bounds it): a client trickling a frame
	// in holds the partial frame's buffer only that long.
	pending := c.read == readMessages && !c.paused && c.rd != nil
	switch {
	case pending && !c.frameDue:
		c.frameDue = true
		sessions().timers.arm(c, dlFrame, c.h.handshakeTimeout)
	case !pending && c.frameDue:
		c.frameDue = false
		sessions().timers.disarm(c, dlFrame)
	}
}

// onFrame handles one client frame; false stops reading frames (paused,
// closed or ended).
func (c *conn) onFrame(op byte, payload []byte) bool {
	switch op {
	case opPing:
		_ = c.writeFrame(opPong, payload, time.Now().Add(controlWriteWait))
		return true
	case opPong:
		c.onPong()
		return true
	case opClose:
		// Answered with the user agent's code, as gorilla did, unless this
		// side's close frame went out first (writeFrame refuses then).
		code := closeNoStatus
		if len(payload) >= 2 {
			code = int(binary.BigEndian.Uint16(payload))
		}
		_ = c.writeFrame(opClose, closePayload(code, ""), time.Now().Add(controlWriteWait))
		c.end()
		return false
	}
	var err error
	if c.read == readHello {
		err = c.handshake(op, payload)
	} else {
		err = c.message(op, payload)
	}
	if err != nil {
		_ = c.fail(err)
		c.drain()
		return false
	}
	return !c.paused && c.read != readEnded
}

// message handles one client message of an identified session.
func (c *conn) message(op byte, data []byte) error {
	if op != opText {
		return &frameError{Code: closeUnsupported, Reason: "expected text", Err: errBinaryFrame}
	}
	msg, err := decodeClientMessage(data)
	if err != nil {
		return err
	}
	return c.handle(msg)
}

// drain stops handling the user agent's frames after this side closed on
// an error: what still comes is discarded until the user agent closes,
// closeDrainBytes or closeGrace.
func (c *conn) drain() {
	if c.read == readEnded {
		return
	}
	if !c.isClosing() {
		c.end()
		return
	}
	c.read = readDraining
	c.paused = false
	c.rd = nil
}

// end closes the socket and ends the session: torn down if hello was
// answered, else only taken out of the hub.
func (c *conn) end() {
	if c.read == readEnded {
		return
	}
	c.read = readEnded
	sessions().timers.stop(c)
	if c.br != nil {
		c.br.close()
	} else {
		sessions().poll.detach(c)
	}
	c.rd = nil
	_ = c.nc.Close()
	c.mu.Lock()
	answered := c.state.answered()
	c.mu.Unlock()
	if answered {
		c.teardown()
	} else {
		c.h.unregister(c)
	}
	c.h.untrack(c)
	c.h.wg.Done()
}

// isClosed reports whether the session is being torn down.
func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == stateClosed
}

// isClosing reports whether a close frame was sent (or the session is
// torn down).
func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.closing()
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
	return c.writeFrame(opText, frame, time.Now().Add(writeWait))
}

// writeFrame writes one frame by the deadline. After a failed write the
// socket is ended (the session's worker does it) and every later write
// fails at once; after the close frame, every later write fails.
func (c *conn) writeFrame(op byte, payload []byte, deadline time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeFrameLocked(op, payload, deadline)
}

// writeFrameLocked is writeFrame for a caller holding wmu.
func (c *conn) writeFrameLocked(op byte, payload []byte, deadline time.Time) error {
	switch c.wdone {
	case wdoneClose:
		return errCloseSent
	case wdoneFailed:
		return errWriteFailed
	}
	err := writeFrame(c.nc, op, payload, deadline)
	switch {
	case err != nil:
		c.wdone = wdoneFailed
		if c.br != nil {
			// Its reader goroutine sees the socket fail.
			_ = c.nc.Close()
		} else {
			c.schedule(evAbort)
		}
	case op == opClose:
		c.wdone = wdoneClose
	}
	return err
}

// Values of conn.wdone.
const (
	wdoneClose  = 1
	wdoneFailed = 2
)

// errWriteFailed is a write after a failed one.
var errWriteFailed = errors.New("push: websocket: an earlier write failed")

// closeWith starts closing the session from any goroutine: the close frame
// is sent and the user agent is given closeGrace to answer it. Only the
// first call counts.
func (c *conn) closeWith(code int, reason string) {
	c.mu.Lock()
	if !c.state.markClosing() {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	rt := sessions()
	rt.timers.disarm(c, dlKeepalive)
	_ = c.writeFrame(opClose, closePayload(code, reason), time.Now().Add(closeGrace))
	rt.timers.arm(c, dlGrace, closeGrace)
	c.schedule(evWake) // a paused session reads again, to see the answer
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
	var save []*pendingDirect
	var acked []string
	if fl := c.inflight; fl != nil {
		for _, pd := range fl.direct {
			if pd.state == directPending {
				pd.state = directClosing
				save = append(save, pd)
			}
		}
		for _, e := range fl.batch {
			if e.acked && e.topic == "" {
				acked = append(acked, e.id)
			}
		}
		fl.batch = nil
		c.trimInflight()
	}
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
