package natssrc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/source"
)

// Consumer is one source's durable pull consumer on its own connection;
// it implements source.Consumer.
type Consumer struct {
	nc       *nats.Conn
	cons     jetstream.Consumer
	iter     jetstream.MessagesContext
	stream   string
	durable  string
	prefetch int
	// lostPulls counts heartbeat losses in a row with the connection up
	// (reset by a message): up to maxLostPulls the pull is re-issued.
	lostPulls int

	mu sync.Mutex
	// held are the messages Receive returned and Settle has not settled
	// yet: Close Naks them.
	held   map[jetstream.Msg]struct{}
	closed bool
	// failed is an error the iterator reported while Receive was filling
	// a batch: the next Receive returns it.
	failed error
}

var _ source.Consumer = (*Consumer)(nil)

// Receive implements source.Consumer.
func (c *Consumer) Receive(ctx context.Context, max int) ([]*source.Message, error) {
	if max <= 0 {
		max = 1
	}
	if err := c.failed; err != nil {
		return nil, err
	}
	var first jetstream.Msg
	for {
		m, err := c.iter.Next(jetstream.NextContext(ctx))
		if err == nil {
			first = m
			c.lostPulls = 0
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !c.repull(err) {
			return nil, c.receiveError(err)
		}
	}
	msgs := []*source.Message{c.message(first)}
	for len(msgs) < max {
		m, err := c.iter.Next(jetstream.NextMaxWait(drainWait))
		if err != nil {
			// Nothing more right now, or a failure the next Receive
			// reports: return what arrived.
			if !errors.Is(err, nats.ErrTimeout) && !c.repull(err) {
				c.failed = c.receiveError(err)
			}
			break
		}
		msgs = append(msgs, c.message(m))
	}
	return msgs, nil
}

// message converts m and holds it until it is settled.
func (c *Consumer) message(m jetstream.Msg) *source.Message {
	c.mu.Lock()
	c.held[m] = struct{}{}
	c.mu.Unlock()
	out := &source.Message{Body: m.Data(), Route: m.Subject(), Token: m}
	if h := m.Headers(); len(h) > 0 {
		out.Headers = make(map[string]string, len(h))
		for k, v := range h {
			if len(v) > 0 {
				out.Headers[k] = v[0]
			}
		}
		out.MessageID = h.Get(jetstream.MsgIDHeader)
	}
	if md, err := m.Metadata(); err == nil {
		out.Timestamp = md.Timestamp
	}
	return out
}

// maxLostPulls bounds the pulls re-issued in a row after missed
// heartbeats while the connection is up.
const maxLostPulls = 3

// repull re-issues the pull after err when err is a missed heartbeat on a
// connection that is still up: a busy client (or server) can miss two
// heartbeats without anything being wrong, and a new pull request costs
// nothing. A pull lost maxLostPulls times in a row, or on a connection
// that is down, is an error for the runner (which redials).
func (c *Consumer) repull(err error) bool {
	if !errors.Is(err, jetstream.ErrNoHeartbeat) || !c.nc.IsConnected() || c.lostPulls >= maxLostPulls {
		return false
	}
	c.lostPulls++
	c.iter.Stop()
	return c.pull() == nil
}

// receiveError says why the pull stopped.
func (c *Consumer) receiveError(err error) error {
	switch {
	case errors.Is(err, jetstream.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionClosed), c.nc.IsClosed():
		return errors.New("the connection to the NATS server closed (reconnecting gave up)")
	case errors.Is(err, jetstream.ErrNoHeartbeat):
		return fmt.Errorf("no heartbeat from the NATS server for %s: the pull on stream %q is lost", 2*pullHeartbeat, c.stream)
	case errors.Is(err, jetstream.ErrConsumerDeleted):
		return fmt.Errorf("the durable consumer %q on stream %q was deleted", c.durable, c.stream)
	}
	return fmt.Errorf("pulling from stream %q: %s", c.stream, apiMessage(err))
}

// Settle implements source.Consumer: Ack each acked, Term each rejected,
// then one flush, so that the server has received them when it returns.
func (c *Consumer) Settle(ctx context.Context, acked, rejected []*source.Message) error {
	c.release(acked)
	c.release(rejected)
	for _, m := range acked {
		if err := token(m).Ack(); err != nil {
			return fmt.Errorf("acking a message: %w", err)
		}
	}
	for _, m := range rejected {
		if err := token(m).Term(); err != nil {
			return fmt.Errorf("terminating a rejected message: %w", err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, closeTimeout)
		defer cancel()
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("the NATS server did not confirm the acks: %w", err)
	}
	return nil
}

func token(m *source.Message) jetstream.Msg { return m.Token.(jetstream.Msg) }

// release forgets msgs: their fate is the server's now.
func (c *Consumer) release(msgs []*source.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		delete(c.held, token(m))
	}
}

// Pending implements source.Consumer: the messages the durable has not
// delivered yet plus those delivered and not acknowledged (held by a
// node, or waiting for AckWait after one died).
func (c *Consumer) Pending(ctx context.Context) (int64, bool) {
	info, err := c.cons.Info(ctx)
	if err != nil {
		return 0, false
	}
	return int64(info.NumPending) + int64(info.NumAckPending), true
}

// Close implements source.Consumer: it stops pulling, Naks what it holds
// (messages received and not settled, and those still in the client's
// buffer) so that the stream redelivers them after nakDelay instead of
// AckWait, and closes the connection.
func (c *Consumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	held := make([]jetstream.Msg, 0, len(c.held))
	for m := range c.held {
		held = append(held, m)
	}
	clear(c.held)
	c.mu.Unlock()

	// Drain unsubscribes the pull's inbox; Next returns what is still
	// buffered, then ErrMsgIteratorClosed.
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	c.iter.Drain()
	for ctx.Err() == nil {
		m, err := c.iter.Next(jetstream.NextContext(ctx))
		if err != nil {
			break
		}
		held = append(held, m)
	}
	if c.nc.IsConnected() && len(held) > 0 {
		for _, m := range held {
			_ = m.NakWithDelay(nakDelay)
		}
		_ = c.nc.FlushWithContext(ctx)
	}
	c.nc.Close()
	return nil
}
