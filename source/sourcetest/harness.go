package sourcetest

import (
	"testing"

	"github.com/heraldhq/herald"
)

// Harness adapts one broker to the suite.
type Harness interface {
	// Type is the source type under test.
	Type() herald.DestinationType
	// URL is the broker's URL (a connection of Type is created with it).
	URL() string
	// NewSource prepares a fresh place on the broker (a queue, a stream, a
	// topic) and returns a source reading it: Type and the type's fields
	// set; the suite sets Name, Connection, Mapping and the rest. It
	// registers its own cleanup.
	NewSource(t *testing.T) *herald.Source
	// Publish puts messages where src reads, in order, durably (a
	// publisher confirm, a PubAck, XADD, a PUBACK), and returns once they
	// are all there.
	Publish(t *testing.T, src *herald.Source, msgs []Msg)
}

// Msg is one message the suite publishes.
type Msg struct {
	Body []byte
	// Headers travel as the broker's headers (for Redis: entry fields
	// beside body; for MQTT 5: user properties).
	Headers map[string]string
	// ID is the broker message id where the broker has one to set (AMQP
	// message_id, Nats-Msg-Id); "" for none.
	ID string
}

// Restarter is implemented by a Harness that can stop and start its
// broker (the restart case). Restart stops the server, waits stop, then
// starts it and waits until it accepts clients again; run between them
// does what the suite needs while the broker is down.
type Restarter interface {
	Restart(t *testing.T, down func())
}

// DeadLetters is implemented by a Harness that can count the messages a
// source rejected where the broker keeps them (an AMQP dead-letter queue,
// Redis <stream>:rejected); the poison case then checks that count.
type DeadLetters interface {
	DeadLetters(t *testing.T, src *herald.Source) int
}

// Backlog is implemented by a Harness whose broker keeps a bounded number
// of messages for a consumer that is not connected and drops the rest
// (Mosquitto's max_queued_messages per session): the restart case then
// publishes at most Backlog messages at a time while no node may be
// consuming.
type Backlog interface {
	Backlog() int
}
