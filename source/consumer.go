package source

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// Message is one broker message as a Consumer received it.
type Message struct {
	// Body is the payload (the "body" field of a Redis entry).
	Body []byte
	// Headers are the message's headers as strings (AMQP headers, NATS
	// headers, MQTT user properties, a Redis entry's other fields).
	Headers map[string]string
	// Route is where the message was published: the AMQP routing key, the
	// NATS subject, the MQTT topic, the Redis stream. It is the mapping
	// document's routing_key, subject, topic or stream field (RouteField)
	// and the event type's default.
	Route string
	// MessageID is the broker's id of the message ("" when it has none):
	// the AMQP message_id, the Nats-Msg-Id header, the Redis entry id, the
	// MQTT correlation data... whatever the broker package documents.
	MessageID string
	// Timestamp is when the broker took the message (zero: unknown).
	Timestamp time.Time
	// Token is the broker package's own handle to settle the message
	// (delivery tag, *jetstream.Msg, entry id, *paho.Publish).
	Token any

	// RejectReason and RejectMessage are set by the runner on messages it
	// hands to Settle as rejected.
	RejectReason, RejectMessage string
}

// Consumer is one source consumed on one connection by this node. The
// runner calls Receive and Settle from one goroutine, never at once, but
// it calls Receive again before it settles the batch it has (two batches
// in flight: one commits while the next is received, see
// batchesInFlight), so a consumer must keep delivering while up to
// DialParams.Prefetch messages are unsettled. Receive's ctx ends, besides
// at shutdown, when the earlier batch's commit returned: a Receive then
// returns ctx's error without losing a message (what it did not return
// stays with the consumer or the broker). Settle calls come in receive
// order, one batch each.
type Consumer interface {
	// Receive returns the next messages, at most max, waiting until at
	// least one is there or ctx ends (then ctx's error). Any other error
	// means the consumer is broken: the runner closes it and dials again
	// after a backoff, and the broker redelivers what was not settled.
	Receive(ctx context.Context, max int) ([]*Message, error)
	// Settle acknowledges acked (their events are committed) and rejects
	// rejected without requeue (poison: to the queue's dead-letter
	// exchange, JetStream Term, a Redis copy to <stream>:rejected then
	// XACK, an MQTT ack). Both are in receive order.
	Settle(ctx context.Context, acked, rejected []*Message) error
	// Pending returns the backlog where the broker reports one (queue
	// depth, consumer pending, group lag); ok false when unknown.
	Pending(ctx context.Context) (n int64, ok bool)
	// Close releases the consumer. Unsettled messages go back to the
	// broker (it redelivers them).
	Close() error
}

// DialParams are what a Dialer needs to open a consumer.
type DialParams struct {
	Source     *herald.Source
	Connection *herald.Connection
	// Node is this node's id: consumer names, client ids.
	Node string
	// Prefetch bounds the messages unsettled at once: twice
	// Source.Prefetch (or its default), as the runner has up to two
	// batches of Source.Prefetch in flight. A consumer uses it as the
	// broker's window (basic.qos, MaxAckPending, receive maximum) and as
	// the most it returns unsettled.
	Prefetch int
}

// Dialer opens a Consumer. Its error's message must not hold the
// connection URL (it may carry a password).
type Dialer func(ctx context.Context, p DialParams) (Consumer, error)

// RouteField names the mapping document's field for Message.Route per
// source type.
func RouteField(t herald.DestinationType) string {
	switch t {
	case herald.DestinationAMQP:
		return "routing_key"
	case herald.DestinationNATS:
		return "subject"
	case herald.DestinationMQTT:
		return "topic"
	case herald.DestinationRedis:
		return "stream"
	}
	return "route"
}

// Dialers maps source types to their Dialer. cmd/herald registers the
// broker packages' dialers; tests register their own.
type Dialers struct {
	mu sync.RWMutex
	m  map[herald.DestinationType]Dialer
}

// Register sets the dialer of type t.
func (d *Dialers) Register(t herald.DestinationType, dial Dialer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[herald.DestinationType]Dialer{}
	}
	d.m[t] = dial
}

// Dial opens a consumer with the dialer of the source's type.
func (d *Dialers) Dial(ctx context.Context, p DialParams) (Consumer, error) {
	d.mu.RLock()
	dial := d.m[p.Source.Type]
	d.mu.RUnlock()
	if dial == nil {
		return nil, fmt.Errorf("this node has no consumer for sources of type %s", p.Source.Type)
	}
	return dial(ctx, p)
}
