package push

// This file holds the nudge: after messages of a user agent are stored, the
// node its router record names now is told to read them (PUT /notif, or
// the local hub), and a nudge that failed is tried again a few times.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald"
)

// Nudge retries. A nudge that failed (the node did not answer in time, as
// under a reconnect storm) leaves the messages stored while their user
// agent stays connected, until it next reconnects; so it is tried again
// after 1, 2, 4, 8 and 16 s (31 s in all), each time to the node the record
// names then (herald_push_handoffs_total{kind="notif",result="retry"}).
// At most maxPendingNudges retries wait at once per node (each a runtime
// timer and a few words); past that a failed nudge is not retried
// (result="dropped").
const (
	nudgeAttempts    = 6
	nudgeFirstRetry  = time.Second
	maxPendingNudges = 10_000
)

// nudger counts the waiting retries of one Server.
type nudger struct {
	pending atomic.Int64
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
		return
	}
	n := &s.nudges
	if n.pending.Add(1) > maxPendingNudges {
		n.pending.Add(-1)
		s.cfg.Observer.ObserveHandoff("notif", "dropped")
		return
	}
	s.cfg.Observer.ObserveHandoff("notif", "retry")
	time.AfterFunc(nudgeFirstRetry<<(attempt-1), func() {
		defer n.pending.Add(-1)
		select {
		case <-s.hub.stop:
			return
		default:
		}
		ctx, cancel := storeCtx()
		defer cancel()
		s.nudgeAttempt(ctx, uaid, attempt+1)
	})
}
