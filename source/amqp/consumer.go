package amqpsrc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/source"
)

// pendingTimeout bounds one queue-depth query: the depth is a nicety,
// never a reason to hold the runner.
const pendingTimeout = 5 * time.Second

// maxPrefetch is the largest basic.qos prefetch count (an unsigned short).
const maxPrefetch = 65535

// Consumer consumes one queue on its own connection; it implements
// source.Consumer.
type Consumer struct {
	queue string
	conn  *amqp.Connection
	ch    *amqp.Channel
	// deliveries is the pump's buffer (see setup), closed when the
	// driver ends the consumer.
	deliveries <-chan amqp.Delivery
	// chClosed and connClosed receive the channel's and the connection's
	// closing error (nil, then closed, on a client-side close).
	chClosed, connClosed chan *amqp.Error

	mu sync.Mutex
	// unsettled are the delivery tags received and not yet settled.
	unsettled map[uint64]struct{}
	closed    bool

	// depthMu guards depth, the channel Pending declares the queue on
	// (opened on first use, reopened after a failure); a slow declare
	// holds it, never mu.
	depthMu sync.Mutex
	depth   *amqp.Channel
}

// Token is Message.Token of this package: the delivery tag on the
// consumer's channel, and whether RabbitMQ had delivered the message
// before (to a consumer that closed without settling it).
type Token struct {
	Tag         uint64
	Redelivered bool
}

var _ source.Consumer = (*Consumer)(nil)

// Dial opens a consumer of p.Source.Queue; it is the source.Dialer of
// type amqp. ctx bounds the whole setup.
func Dial(ctx context.Context, p source.DialParams) (source.Consumer, error) {
	return dial(ctx, p)
}

func dial(ctx context.Context, p source.DialParams) (*Consumer, error) {
	queue := p.Source.Queue
	conn, err := connect(ctx, p.Connection, fmt.Sprintf("herald source %s (node %s)", p.Source.Name, p.Node))
	if err != nil {
		return nil, err
	}
	// The channel calls below wait for the broker without a context:
	// closing the connection when ctx ends releases them.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	c, err := setup(conn, queue, p)
	if !stop() {
		// ctx ended during the setup: the connection is closed.
		return nil, fmt.Errorf("queue %q: setting up the consumer: %w", queue, ctx.Err())
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

// setup opens the channel, checks the queue, sets the prefetch and
// starts consuming.
func setup(conn *amqp.Connection, queue string, p source.DialParams) (*Consumer, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, queueError(queue, err)
	}
	if _, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil); err != nil {
		return nil, queueError(queue, err)
	}
	// The broker stops delivering when prefetch messages (twice the
	// source's: the runner's two batches in flight) are unacked on this
	// channel: what the consumer holds stays bounded.
	prefetch := p.Prefetch
	if prefetch <= 0 {
		prefetch = herald.DefaultSourcePrefetch
	}
	qos := min(prefetch, maxPrefetch)
	if err := ch.Qos(qos, 0, false); err != nil {
		return nil, queueError(queue, err)
	}
	c := &Consumer{
		queue: queue, conn: conn, ch: ch, unsettled: map[uint64]struct{}{},
		// One close each at most, so a buffer of one never blocks the
		// driver's shutdown.
		chClosed:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		connClosed: conn.NotifyClose(make(chan *amqp.Error, 1)),
	}
	deliveries, err := ch.Consume(queue, consumerTag(p.Node, p.Source.Name), false, false, false, false, nil)
	if err != nil {
		return nil, queueError(queue, err)
	}
	// The driver hands deliveries over one at a time on an unbuffered
	// channel, so a non-blocking drain would see one or two of the many
	// already here (batches of two, a commit each). This pump moves them
	// into a buffer of the prefetch: it never blocks (the broker sends no
	// more than prefetch unsettled), memory stays bounded, and Receive
	// takes what arrived. It ends when the driver closes deliveries (the
	// channel or connection closed).
	buf := make(chan amqp.Delivery, qos)
	go func() {
		defer close(buf)
		for d := range deliveries {
			buf <- d
		}
	}()
	c.deliveries = buf
	return c, nil
}

// Receive returns the deliveries buffered now, at most max, waiting for
// the first one. It returns an error when the channel or the connection
// closes or the broker cancels the consumer (the queue was deleted).
func (c *Consumer) Receive(ctx context.Context, max int) ([]*source.Message, error) {
	if max <= 0 {
		max = 1
	}
	var d amqp.Delivery
	var ok bool
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case e := <-c.chClosed:
		return nil, c.closeError("the channel closed", e)
	case e := <-c.connClosed:
		return nil, c.closeError("the connection closed", e)
	case d, ok = <-c.deliveries:
		if !ok {
			return nil, c.lost()
		}
	}
	msgs := make([]*source.Message, 0, min(max, len(c.deliveries)+1))
	msgs = append(msgs, c.message(&d))
	// Then what is already buffered, without waiting for more.
drain:
	for len(msgs) < max {
		select {
		case d, ok = <-c.deliveries:
			if !ok {
				// The next Receive says why; these are settled or, if
				// the channel is gone, redelivered.
				break drain
			}
			msgs = append(msgs, c.message(&d))
		default:
			break drain
		}
	}
	return msgs, nil
}

// lost says why the delivery channel closed: the channel or connection
// closed, or the broker cancelled the consumer.
func (c *Consumer) lost() error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("queue %q: the consumer is closed", c.queue)
	}
	select {
	case e := <-c.chClosed:
		return c.closeError("the channel closed", e)
	case e := <-c.connClosed:
		return c.closeError("the connection closed", e)
	default:
	}
	return fmt.Errorf("queue %q: the broker cancelled the consumer (queue deleted?)", c.queue)
}

func (c *Consumer) closeError(what string, e *amqp.Error) error {
	if e == nil {
		return fmt.Errorf("queue %q: %s", c.queue, what)
	}
	return fmt.Errorf("queue %q: %s: %s (%d)", c.queue, what, herald.CleanLine(e.Reason, 200), e.Code)
}

// message converts a delivery and records its tag as unsettled.
func (c *Consumer) message(d *amqp.Delivery) *source.Message {
	c.mu.Lock()
	c.unsettled[d.DeliveryTag] = struct{}{}
	c.mu.Unlock()
	return &source.Message{
		Body:      d.Body,
		Headers:   headers(d.Headers),
		Route:     d.RoutingKey,
		MessageID: d.MessageId,
		Timestamp: utc(d.Timestamp),
		Token:     Token{Tag: d.DeliveryTag, Redelivered: d.Redelivered},
	}
}

// Settle acks acked and nacks rejected without requeue (to the queue's
// dead-letter exchange). When acked is every unsettled message up to the
// highest of them (the runner's oldest batch, the next one received
// behind it or not), one ack with multiple set covers them.
func (c *Consumer) Settle(_ context.Context, acked, rejected []*source.Message) error {
	seen := make(map[uint64]struct{}, len(acked)+len(rejected))
	ackTags, err := c.tags(acked, seen)
	if err != nil {
		return err
	}
	rejectTags, err := c.tags(rejected, seen)
	if err != nil {
		return err
	}
	var last uint64
	for _, t := range ackTags {
		last = max(last, t)
	}
	all := false
	if len(rejectTags) == 0 && len(ackTags) > 1 {
		c.mu.Lock()
		upTo := 0
		for t := range c.unsettled {
			if t <= last {
				upTo++
			}
		}
		c.mu.Unlock()
		all = upTo == len(ackTags)
	}
	if all {
		// Tags grow in delivery order and every unsettled one up to last
		// is in acked (they are distinct unsettled tags, as many):
		// multiple on last acks exactly these.
		if err := c.ch.Ack(last, true); err != nil {
			return c.settleError(err)
		}
		c.forget(ackTags)
		return nil
	}
	for _, t := range ackTags {
		if err := c.ch.Ack(t, false); err != nil {
			return c.settleError(err)
		}
		c.forget([]uint64{t})
	}
	for _, t := range rejectTags {
		if err := c.ch.Nack(t, false, false); err != nil {
			return c.settleError(err)
		}
		c.forget([]uint64{t})
	}
	return nil
}

// tags returns the delivery tags of msgs, each of which must be unsettled
// on this consumer and not in seen (settling an unknown or settled tag is
// a channel error: the broker would close the channel).
func (c *Consumer) tags(msgs []*source.Message, seen map[uint64]struct{}) ([]uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]uint64, 0, len(msgs))
	for _, m := range msgs {
		tok, ok := m.Token.(Token)
		if !ok {
			return nil, fmt.Errorf("queue %q: a message of another consumer (token %T)", c.queue, m.Token)
		}
		if _, ok := c.unsettled[tok.Tag]; !ok {
			return nil, fmt.Errorf("queue %q: delivery %d is not unsettled on this consumer", c.queue, tok.Tag)
		}
		if _, dup := seen[tok.Tag]; dup {
			return nil, fmt.Errorf("queue %q: delivery %d is settled twice in one call", c.queue, tok.Tag)
		}
		seen[tok.Tag] = struct{}{}
		out = append(out, tok.Tag)
	}
	return out, nil
}

func (c *Consumer) forget(tags []uint64) {
	c.mu.Lock()
	for _, t := range tags {
		delete(c.unsettled, t)
	}
	c.mu.Unlock()
}

func (c *Consumer) settleError(err error) error {
	if errors.Is(err, amqp.ErrClosed) {
		// Say why it closed when the driver told.
		select {
		case e := <-c.chClosed:
			return c.closeError("settling: the channel closed (RabbitMQ redelivers what was not settled)", e)
		case e := <-c.connClosed:
			return c.closeError("settling: the connection closed (RabbitMQ redelivers what was not settled)", e)
		default:
		}
		return fmt.Errorf("queue %q: settling: the channel is closed (RabbitMQ redelivers what was not settled)", c.queue)
	}
	var aerr *amqp.Error
	if errors.As(err, &aerr) {
		return fmt.Errorf("queue %q: settling: %s (%d)", c.queue, herald.CleanLine(aerr.Reason, 200), aerr.Code)
	}
	return fmt.Errorf("queue %q: settling: %s", c.queue, herald.CleanLine(err.Error(), 200))
}

// Pending returns the queue's ready messages (not those delivered and
// unacked), from a passive declare on a second channel: a failure there
// (the queue deleted: 404 closes that channel) leaves consuming alone.
func (c *Consumer) Pending(ctx context.Context) (int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, pendingTimeout)
	defer cancel()
	type answer struct {
		n  int64
		ok bool
	}
	done := make(chan answer, 1)
	go func() {
		n, ok := c.depthNow()
		done <- answer{n, ok}
	}()
	select {
	case a := <-done:
		return a.n, a.ok
	case <-ctx.Done():
		// The declare ends when the broker answers or the connection
		// closes (heartbeat or Close).
		return 0, false
	}
}

func (c *Consumer) depthNow() (int64, bool) {
	c.depthMu.Lock()
	defer c.depthMu.Unlock()
	if c.conn.IsClosed() {
		return 0, false
	}
	if c.depth == nil || c.depth.IsClosed() {
		ch, err := c.conn.Channel()
		if err != nil {
			return 0, false
		}
		c.depth = ch
	}
	q, err := c.depth.QueueDeclarePassive(c.queue, false, false, false, false, nil)
	if err != nil {
		return 0, false
	}
	return int64(q.Messages), true
}

// Close closes the connection; RabbitMQ requeues every unsettled
// delivery and redelivers it (with the redelivered flag).
func (c *Consumer) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	if c.conn.IsClosed() {
		return nil
	}
	err := c.conn.CloseDeadline(time.Now().Add(closeTimeout))
	if err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("queue %q: closing: %s", c.queue, herald.CleanLine(err.Error(), 200))
	}
	return nil
}

// utc is t in UTC; zero (no timestamp property) stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
