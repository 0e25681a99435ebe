package push

// This file holds the server notifications of a session: stored messages
// read in batches (a check of storage, nudged by the endpoint or a router
// hand-off), direct messages written as they arrive and awaited until
// acked or stored, and what becomes of both when acks come or the session
// ends.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/heraldhq/herald/store"
)

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

// inflight is what a session has written and awaits acks for; nil while
// it awaits none (most sessions, most of the time), so an idle session
// does not carry its two slices (ADR 0027).
type inflight struct {
	// direct are the written, unacked direct messages (TTL > 0).
	direct []*pendingDirect
	// batch is the storage batch in flight: the next is read once all of
	// it is acked.
	batch []*storedEntry
}

// fl returns the session's inflight, making it if needed. Called with mu
// held.
func (c *conn) fl() *inflight {
	if c.inflight == nil {
		c.inflight = &inflight{}
	}
	return c.inflight
}

// trimInflight drops the session's inflight once it holds nothing.
// Called with mu held.
func (c *conn) trimInflight() {
	if c.inflight != nil && len(c.inflight.direct) == 0 && c.inflight.batch == nil {
		c.inflight = nil
	}
}

// storedEntry is one message of the storage batch in flight.
type storedEntry struct {
	id, chid, topic string
	version         string
	acked           bool
}

// afterAck deletes a fully acked storage batch and reads the next.
func (c *conn) afterAck() error {
	c.mu.Lock()
	if c.inflight == nil || c.inflight.batch == nil || slices.ContainsFunc(c.inflight.batch, func(e *storedEntry) bool { return !e.acked }) {
		c.mu.Unlock()
		return nil
	}
	var ids []string
	for _, e := range c.fl().batch {
		if e.topic == "" {
			ids = append(ids, e.id)
		}
	}
	c.fl().batch = nil
	c.trimInflight()
	c.check = checkRunning
	c.mu.Unlock()
	if err := c.deleteMessages(ids); err != nil {
		c.mu.Lock()
		c.check = checkIdle
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
	_, err := c.h.deletes.do(&store.PushMessageDeleteParams{UAID: c.uaid, IDs: ids})
	return err
}

// notify is a check-storage nudge: it starts a check unless one is running
// or a batch is in flight (then the running work lists again when done).
func (c *conn) notify() bool {
	c.mu.Lock()
	if c.state.closing() || c.reset {
		c.mu.Unlock()
		return false
	}
	if c.check != checkIdle || (c.inflight != nil && c.inflight.batch != nil) {
		// A running check lists again before it stops; a batch in
		// flight is followed by a check once it is fully acked.
		if c.check != checkIdle {
			c.check = checkNudged
		}
		c.mu.Unlock()
		return true
	}
	c.check = checkRunning
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
// check. The caller has set c.check to checkRunning.
func (c *conn) checkLoop() {
	h := c.h
	for {
		c.mu.Lock()
		if c.check == checkIdle {
			c.mu.Unlock()
			return
		}
		if c.state.closing() {
			c.check = checkIdle
			c.mu.Unlock()
			return
		}
		c.check = checkRunning
		c.mu.Unlock()

		msgs, err := h.lists.do(c.uaid)
		if err != nil {
			c.mu.Lock()
			c.check = checkIdle
			c.mu.Unlock()
			_ = c.fail(&frameError{Code: closeError, Reason: "store error", Err: fmt.Errorf("error listing messages: %w", err)})
			return
		}

		c.mu.Lock()
		if c.state.closing() {
			c.check = checkIdle
			c.mu.Unlock()
			return
		}
		if len(msgs) == 0 {
			if c.check == checkNudged {
				c.mu.Unlock()
				continue
			}
			c.check = checkIdle
			c.mu.Unlock()
			return
		}
		for _, m := range msgs {
			if m.CreatedAt.UnixMilli() <= c.connectedAt {
				c.backlogRead++
			}
		}
		if int(c.backlogRead) > h.msgLimit {
			c.reset = true
			c.check = checkIdle
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
			if i := slices.IndexFunc(c.fl().direct, func(pd *pendingDirect) bool { return pd.m.ID == m.ID }); i >= 0 {
				e.version = c.fl().direct[i].version
			} else {
				v, err := h.keys.MessageID(&MessageRef{UAID: c.uaid, ChannelID: m.ChannelID, ID: m.ID, Topic: m.Topic})
				if err != nil {
					c.check = checkIdle
					c.mu.Unlock()
					_ = c.fail(fmt.Errorf("error making message id: %w", err))
					return
				}
				e.version = v
				frames = append(frames, encodeNotification(m, v))
			}
			batch = append(batch, e)
		}
		if len(batch) > 0 {
			c.fl().batch = batch
		}
		c.check = checkIdle
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

// helloAnswerWait bounds how long a delivery waits for a session's hello
// answer (deliver), polling every helloAnswerPoll: a hello waits on one
// gathered store statement (storeTimeout at most), then answers at once.
const (
	helloAnswerWait = storeTimeout
	helloAnswerPoll = time.Millisecond
)

// deliver writes a direct message and waits for its outcome (Deliver).
func (c *conn) deliver(ctx context.Context, m *store.PushMessage, version string) (DeliverOutcome, error) {
	frame := encodeNotification(m, version)
	var pd *pendingDirect
	c.mu.Lock()
	// A session in the hub whose hello is not answered yet is taking the
	// router record (its connect may have committed already, and the
	// sender read that record): wait for the answer. Answered
	// NotConnected, the sender would clear the record of a user agent
	// about to be connected here, and its later messages would be stored
	// with nothing to nudge (TestBenchPushCluster lost one this way once
	// connects were gathered, which widens the time from commit to answer).
	for wait := helloAnswerWait; c.state == stateHello && !c.reset && wait > 0 && ctx.Err() == nil; wait -= helloAnswerPoll {
		c.mu.Unlock()
		time.Sleep(helloAnswerPoll)
		c.mu.Lock()
	}
	if c.state != stateReady || c.reset {
		c.mu.Unlock()
		return NotConnected, nil
	}
	if m.TTL > 0 && c.inflight != nil && len(c.inflight.direct) >= ClientChannelCapacity {
		c.mu.Unlock()
		return QueueFull, nil
	}
	if m.TTL > 0 {
		// Tracked before it is written, so an ack cannot outrun it.
		pd = &pendingDirect{m: m, version: version, done: make(chan struct{})}
		c.fl().direct = append(c.fl().direct, pd)
	}
	c.mu.Unlock()
	if err := c.write(frame); err != nil {
		if pd == nil {
			return NotConnected, nil
		}
		c.mu.Lock()
		if pd.state == directPending {
			c.fl().direct = slices.DeleteFunc(c.fl().direct, func(x *pendingDirect) bool { return x == pd })
			c.trimInflight()
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
	remove := func() {
		c.fl().direct = slices.DeleteFunc(c.fl().direct, func(x *pendingDirect) bool { return x == pd })
		c.trimInflight()
	}
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
	case c.state == stateClosed:
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

// saveOnClose stores the unacked direct messages of a closing session that
// have not expired (an expired one is as good as stored and expired). The
// session the router record names now is nudged to read them: a newer one
// here, or one on another node (the user agent may have connected there,
// and read its storage, before this socket's end was seen).
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
	ctx, cancel = storeCtx()
	c.h.s.nudgeOwner(ctx, c.uaid)
	cancel()
	return Stored, nil
}
