package push

// This file holds the client messages of an identified session: the
// handlers of register, unregister, ack, nack,
// broadcast_subscribe and the protocol ping.

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/heraldhq/herald/store"
)

// pauseReads stops reading this session's frames for d (at most
// maxRefusedPause, or until the session closes): after a refused register
// the next one could only be refused too, and a client that sends it at
// once anyway would make the node answer as fast as the round trip allows
// (measured: 12,000 refusals in 5 s from four sessions, the largest share
// of the node's CPU under TestResourceExhaustion's attack). Unread frames
// wait in the socket's buffers (the poller is not asked for readiness
// until dlResume), and a client that fills them blocks on its own writes.
// Deliveries to the session are written by other goroutines and do not
// wait; its acks wait with its other frames. No worker waits out the
// pause.
func (c *conn) pauseReads(d time.Duration) {
	c.paused = true
	sessions().timers.arm(c, dlResume, min(d, maxRefusedPause))
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
	now := c.h.now().UnixNano()
	if c.lastPing != 0 && time.Duration(now-c.lastPing) < c.h.minPingInterval {
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
		for _, e := range c.fl().batch {
			if e.chid == chid {
				e.acked = true
			}
		}
		c.fl().direct = slices.DeleteFunc(c.fl().direct, func(pd *pendingDirect) bool {
			return pd.m.ChannelID == chid && pd.state == directStored
		})
		c.trimInflight()
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
		if i := slices.IndexFunc(c.fl().direct, func(pd *pendingDirect) bool {
			return pd.version == u.Version && pd.m.ChannelID == u.ChannelID
		}); i >= 0 {
			pd := c.fl().direct[i]
			switch pd.state {
			case directPending:
				c.fl().direct = slices.Delete(c.fl().direct, i, i+1)
				pd.state, pd.outcome = directAcked, Delivered
				close(pd.done)
			case directSaving:
				pd.ackedWhileSaving = true
			case directStored:
				c.fl().direct = slices.Delete(c.fl().direct, i, i+1)
				del = append(del, pd.m.ID)
			}
		}
		for _, e := range c.fl().batch {
			if !e.acked && e.version == u.Version && e.chid == u.ChannelID {
				e.acked = true
				if e.topic != "" {
					del = append(del, e.id)
				}
			}
		}
		c.h.obs.ObserveAck(metricCode(u.Code, 100, 102, 100))
	}
	c.trimInflight()
	c.mu.Unlock()
	if len(del) > 0 {
		if err := c.deleteMessages(del); err != nil {
			return &frameError{Code: closeError, Reason: "store error", Err: err}
		}
	}
	return c.afterAck()
}
