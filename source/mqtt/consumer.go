package mqttsrc

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/heraldhq/herald/source"
)

// consumer is one source on one connection (one paho client, never
// reconnected: the runner dials again).
type consumer struct {
	cm     *autopaho.ConnectionManager
	cancel context.CancelFunc

	// msgs holds what the broker sent and Receive has not returned yet,
	// at most prefetch: the handler waits while it is full.
	msgs chan delivery
	// seq numbers deliveries in receive order (Settle merges by it).
	seq uint64
	// prefetch bounds unsettled, the messages Receive returned and Settle
	// has not taken yet. The broker's Receive Maximum should bound them
	// already, but Mosquitto before 2.0.13 lets each PUBACK release up to
	// a Receive Maximum more (eclipse-mosquitto/mosquitto#2306), so the
	// consumer holds the line itself; the surplus waits in msgs and in
	// paho, whose buffer is as large, and then in the socket (paho stops
	// reading).
	prefetch, unsettled int

	// closed ends a handler waiting on a full msgs at Close.
	closed    chan struct{}
	closeOnce sync.Once

	// lost is closed when the connection ends; why says why.
	lost     chan struct{}
	lostOnce sync.Once
	mu       sync.Mutex
	why      string

	// lastAck is when Settle last marked acks (UnixNano): Close lets paho
	// write them first.
	lastAck atomic.Int64
}

// delivery is one received PUBLISH and the client to acknowledge it on.
type delivery struct {
	pb  *paho.Publish
	cli *paho.Client
}

// token is Message.Token.
type token struct {
	seq uint64
	delivery
}

func newConsumer(prefetch int) *consumer {
	return &consumer{msgs: make(chan delivery, prefetch), prefetch: prefetch, closed: make(chan struct{}), lost: make(chan struct{})}
}

// received is paho's OnPublishReceived: it hands the message over, waiting
// while Receive has prefetch messages unread (paho then stops reading the
// connection).
func (c *consumer) received(pr paho.PublishReceived) (bool, error) {
	select {
	case c.msgs <- delivery{pb: pr.Packet, cli: pr.Client}:
	case <-c.closed:
	}
	return true, nil
}

// setLost marks the connection gone (the first reason wins).
func (c *consumer) setLost(why string) {
	c.mu.Lock()
	if c.why == "" {
		c.why = why
	}
	c.mu.Unlock()
	c.lostOnce.Do(func() { close(c.lost) })
}

func (c *consumer) lostErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.New(c.why)
}

// Receive implements source.Consumer: it waits for the first message,
// then takes what is already buffered, up to max. A lost connection is an
// error at once, buffered messages or not: they can no longer be
// acknowledged, and the session redelivers them.
func (c *consumer) Receive(ctx context.Context, limit int) ([]*source.Message, error) {
	limit = min(max(limit, 1), c.prefetch-c.unsettled)
	select {
	case <-c.lost:
		return nil, c.lostErr()
	default:
	}
	msgs := c.msgs
	if limit <= 0 {
		msgs = nil // prefetch messages unsettled: nothing more until Settle
	}
	var d delivery
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.lost:
		return nil, c.lostErr()
	case d = <-msgs:
	}
	out := []*source.Message{c.message(d)}
more:
	for len(out) < limit {
		select {
		case d = <-c.msgs:
			out = append(out, c.message(d))
		default:
			break more
		}
	}
	c.unsettled += len(out)
	return out, nil
}

// message converts one PUBLISH: the payload, the user properties (the
// first value of a repeated name), the topic, and the correlation data as
// the message id.
func (c *consumer) message(d delivery) *source.Message {
	c.seq++
	pb := d.pb
	m := &source.Message{Body: pb.Payload, Headers: map[string]string{}, Route: pb.Topic,
		Token: &token{seq: c.seq, delivery: d}}
	if p := pb.Properties; p != nil {
		for _, u := range p.User {
			if _, ok := m.Headers[u.Key]; !ok {
				m.Headers[u.Key] = u.Value
			}
		}
		m.MessageID = MessageID(p.CorrelationData)
	}
	return m
}

// MessageID is a message's id from its correlation data: the text when it
// is UTF-8, else its hex; "" when absent.
func MessageID(correlation []byte) string {
	if len(correlation) == 0 {
		return ""
	}
	if utf8.Valid(correlation) {
		return string(correlation)
	}
	return hex.EncodeToString(correlation)
}

// Settle implements source.Consumer: MQTT has no reject, so acked and
// rejected messages alike are acknowledged (PUBACK), merged back into
// receive order as MQTT requires; the runner has recorded the rejects.
// paho writes the PUBACKs within ackInterval. After the connection is lost
// nothing is acknowledged (an error: the session redelivers them).
func (c *consumer) Settle(_ context.Context, acked, rejected []*source.Message) error {
	select {
	case <-c.lost:
		return c.lostErr()
	default:
	}
	i, j := 0, 0
	for i < len(acked) || j < len(rejected) {
		var m *source.Message
		if j == len(rejected) || (i < len(acked) && seqOf(acked[i]) < seqOf(rejected[j])) {
			m, i = acked[i], i+1
		} else {
			m, j = rejected[j], j+1
		}
		t, ok := m.Token.(*token)
		if !ok {
			return errors.New("settling a message this MQTT consumer did not receive")
		}
		if err := t.cli.Ack(t.pb); err != nil {
			return errors.New("acknowledging an MQTT message: " + err.Error())
		}
	}
	c.unsettled = max(c.unsettled-len(acked)-len(rejected), 0)
	c.lastAck.Store(time.Now().UnixNano())
	return nil
}

func seqOf(m *source.Message) uint64 {
	if t, ok := m.Token.(*token); ok {
		return t.seq
	}
	return 0
}

// Pending implements source.Consumer: MQTT does not tell a session's
// backlog.
func (c *consumer) Pending(context.Context) (int64, bool) { return 0, false }

// Close implements source.Consumer: it lets paho write the last PUBACKs,
// then disconnects (normal disconnection) keeping the session: the broker
// redelivers the unacknowledged messages to the next consumer with this
// client id, and queues new ones for it meanwhile.
func (c *consumer) Close() error {
	c.shut(true)
	return nil
}

// shut stops the client; flush waits for the marked PUBACKs first.
func (c *consumer) shut(flush bool) {
	c.closeOnce.Do(func() {
		close(c.closed)
		if flush {
			if wait := 3*ackInterval - time.Since(time.Unix(0, c.lastAck.Load())); wait > 0 {
				time.Sleep(wait)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = c.cm.Disconnect(ctx)
		c.cancel()
	})
}
