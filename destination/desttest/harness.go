// Package desttest is the conformance suite every destination type runs
// against its real server (like store/storetest for the stores): Run takes
// a Harness that adapts one type.
package desttest

import (
	"context"
	"testing"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
)

// Harness adapts one destination type to the suite.
type Harness interface {
	// Type is the destination type under test.
	Type() herald.DestinationType
	// Publisher returns the publisher under test, sending through the
	// connections it was built with. The suite closes it at the end.
	Publisher(t *testing.T) destination.Publisher
	// Target prepares a fresh place on the server (an exchange and a bound
	// queue, a stream, a subject, a topic subscription) and returns the
	// destination that publishes there and a Consumer reading what
	// arrives. It registers its own cleanup.
	Target(t *testing.T) (herald.Destination, Consumer)
	// Broken returns a destination whose attempts fail with the type's own
	// failure (unroutable, no_stream, rejected, ...) and the class
	// expected; ok is false when the type has none. A broker failure must
	// be retried (not Result.Permanent); a permanent one (a push service's
	// 400) is dead after one attempt, which the engine cases expect.
	Broken(t *testing.T) (d herald.Destination, class herald.ErrorClass, ok bool)
}

// Unsigned is implemented by a Harness whose messages arrive as the body
// alone, with no headers: Web Push, where the browser gets only the
// decrypted payload (the push service keeps TTL, Urgency, Topic and the
// VAPID Authorization to itself). Unsigned returns why. Run then skips,
// visibly with that reason, the cases that read message headers (the
// signature by webhook.Verify and the npm verifier; herald-event-type,
// herald-tenant and herald-attempt) and runs every other case, telling
// messages apart by the body's event id instead of webhook-id (see
// messageID).
type Unsigned interface {
	Unsigned() string
}

// Consumer reads what a Target received.
type Consumer interface {
	// Next waits for the next message until ctx ends.
	Next(ctx context.Context) (*Received, error)
}

// Received is one message as the server delivered it: its headers (AMQP
// headers table, NATS headers, Redis stream fields other than body, MQTT 5
// user properties; none for an Unsigned harness) and body.
type Received struct {
	Headers map[string]string
	Body    []byte
}
