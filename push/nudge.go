package push

// This file holds the nudge: after messages of a user agent are stored, the
// node its router record names now is told to read them (PUT /notif, or
// the local hub), and a nudge that failed is tried again a few times.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// Nudge retries. A nudge that failed (the node did not answer in time, as
// under a reconnect storm) leaves the messages stored while their user
// agent stays connected, until it next reconnects; so it is tried again
// after 1, 2, 4, 8 and 16 s, then every 30 s, each time to the node the
// record names then (herald_push_handoffs_total{kind="notif",result="retry"}),
// up to nudgeAttempts in all: about 7.5 minutes. A storm that starves the
// node holding the user agent can outlast half a minute (issue 25's
// five-node bench: 79–245 s), and the 31 s the schedule covered before
// left messages stored for connected user agents (result="given_up" now
// counts a schedule that ran out).
//
// Retries are kept per user agent: a failed nudge while one of its user
// agent is waiting restarts that one's schedule instead of adding a
// second (one check reads all of its stored messages). At most
// maxPendingNudges user agents wait at once per node (each a runtime timer
// and a map entry); past that a failed nudge is not retried
// (result="dropped").
const (
	nudgeAttempts    = 20
	nudgeFirstRetry  = time.Second
	nudgeMaxDelay    = 30 * time.Second
	maxPendingNudges = 10_000
)

// nudgeDelay is the wait before attempt+1 of a nudge.
func nudgeDelay(attempt int) time.Duration {
	if attempt >= 6 {
		return nudgeMaxDelay
	}
	return min(nudgeFirstRetry<<(attempt-1), nudgeMaxDelay)
}

// nudger holds the waiting retries of one Server, by uaid: the attempt
// the next one will be.
type nudger struct {
	mu      sync.Mutex
	pending map[string]int
}

// nudgeOwner tells the node that holds uaid's session, as the router
// record says now, to read its stored messages: called after a save,
// because the user agent may have connected, and read its storage, after
// the route that led to the save was read.
func (s *Server) nudgeOwner(ctx context.Context, uaid string) {
	s.nudgeAttempt(ctx, uaid, 1)
}

func (s *Server) nudgeAttempt(ctx context.Context, uaid string, attempt int) {
	u, err := s.cfg.Store.PushUserGet(ctx, uaid)
	switch {
	case err != nil:
		// Stored and not routed: the record is gone (nothing to nudge) or
		// the store failed (retried below).
		if errors.Is(err, herald.ErrNotFound) {
			return
		}
	case u.NodeID == "":
		return // not connected: its next hello reads the storage
	case u.NodeID == s.cfg.NodeID:
		s.hub.Notify(uaid)
		return
	default:
		if s.handoffNotif(ctx, u.NodeID, uaid) {
			return
		}
	}
	s.retryNudge(uaid, attempt)
}

// retryNudge schedules attempt+1 of a failed nudge, if any is left.
func (s *Server) retryNudge(uaid string, attempt int) {
	if attempt >= nudgeAttempts {
		s.cfg.Observer.ObserveHandoff("notif", "given_up")
		return
	}
	n := &s.nudges
	n.mu.Lock()
	if next, waiting := n.pending[uaid]; waiting {
		// Its timer runs; from the start of the schedule again.
		n.pending[uaid] = min(next, attempt+1)
		n.mu.Unlock()
		s.cfg.Observer.ObserveHandoff("notif", "retry")
		return
	}
	if len(n.pending) >= maxPendingNudges {
		n.mu.Unlock()
		s.cfg.Observer.ObserveHandoff("notif", "dropped")
		return
	}
	if n.pending == nil {
		n.pending = map[string]int{}
	}
	n.pending[uaid] = attempt + 1
	n.mu.Unlock()
	s.cfg.Observer.ObserveHandoff("notif", "retry")
	time.AfterFunc(nudgeDelay(attempt), func() {
		n.mu.Lock()
		next := n.pending[uaid]
		delete(n.pending, uaid)
		n.mu.Unlock()
		select {
		case <-s.hub.stop:
			return
		default:
		}
		ctx, cancel := storeCtx()
		defer cancel()
		s.nudgeAttempt(ctx, uaid, next)
	})
}
