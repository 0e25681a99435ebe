package push

// This file holds the states of a session that more than one goroutine
// moves: its lifecycle (sessionState) and its storage check (checkState).
// Both are guarded by conn.mu. sessionState changes only through its
// methods here; checkState is set by notify, checkLoop and afterAck
// (conn_notify.go) and by hello.

// sessionState is where a session is in its life. Two events move it from
// any goroutine, hello answered (the read loop) and a close frame sent
// (closeWith: the read loop, a check, the keepalive timer, a ghosting
// hello, the hub's Close), then teardown ends it (the read loop). A close
// can come before hello is answered and hello still completes (the hub
// closes, or a newer session of the uaid ghosts it, while hello runs), so
// closing has two states: a session that panics is torn down only if hello
// was answered, and otherwise only leaves the hub.
//
//	stateHello ──answered──▶ stateReady
//	    │                        │
//	 closing                  closing
//	    ▼                        ▼
//	stateHelloClosing ─answered─▶ stateClosing
//
//	stateReady, stateClosing ──teardown──▶ stateClosed
type sessionState uint8

const (
	stateHello        sessionState = iota // hello not answered yet
	stateHelloClosing                     // closing, hello not answered yet
	stateReady                            // hello answered: deliveries may be written
	stateClosing                          // hello answered, a close frame sent (or being sent)
	stateClosed                           // the read loop ended; the session is torn down
)

// answered reports whether hello was answered.
func (s sessionState) answered() bool { return s >= stateReady }

// closing reports whether a close frame was sent or the session is torn
// down: nothing more is read into the session's work or started for it.
// A session torn down without a close frame of its own (the user agent
// closed, or the socket failed) counts as closing: its socket is closed,
// so there is no frame left to send.
func (s sessionState) closing() bool { return s == stateHelloClosing || s >= stateClosing }

// markAnswered records that hello was answered.
func (s *sessionState) markAnswered() {
	switch *s {
	case stateHello:
		*s = stateReady
	case stateHelloClosing:
		*s = stateClosing
	}
}

// markClosing records that a close frame is sent; it reports whether this
// call is the first (the one to send it).
func (s *sessionState) markClosing() bool {
	switch *s {
	case stateHello:
		*s = stateHelloClosing
	case stateReady:
		*s = stateClosing
	default:
		return false
	}
	return true
}

// markClosed records the teardown; it reports whether this call is the
// first (the one to do it).
func (s *sessionState) markClosed() bool {
	if *s == stateClosed {
		return false
	}
	*s = stateClosed
	return true
}

// checkState is a session's storage check: listing stored messages and
// sending them as the batch in flight (checkLoop). While a batch is in
// flight the check is idle; the batch's last ack starts the next one
// (afterAck), so a nudge then needs no record.
type checkState uint8

const (
	checkIdle    checkState = iota // no check running
	checkRunning                   // a check is listing storage or sending what it read
	checkNudged                    // running, and a nudge came since it listed: list again before stopping
)
