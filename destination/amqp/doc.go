// Package amqpdest is herald's RabbitMQ destination (AMQP 0-9-1, with
// github.com/rabbitmq/amqp091-go): a Publisher that publishes each attempt
// to the destination's exchange with its routing key (default: the event
// type) and counts it delivered only once the broker confirmed it.
//
// One attempt is one message: persistent (DeliveryMode 2), content-type
// application/json, MessageId the event id, the headers table of
// destination.NewMessage (webhook-id, webhook-timestamp, webhook-signature,
// herald-event-type, herald-attempt, herald-tenant), and the webhook body.
// It is published with mandatory set on a channel in confirm mode, and the
// attempt waits for the confirm, bounded by the subscription's timeout:
//
//   - ack                            → delivered
//   - returned (no queue bound)      → unroutable (retried through the tiers)
//   - nack, or the channel closed    → broker (retried), with the broker's
//     before the confirm               reason (a missing exchange closes the
//     channel with 404 NOT_FOUND)
//   - no confirm within the timeout  → timeout
//   - broker unreachable             → connection or timeout
//
// A confirm from RabbitMQ means the broker took responsibility: for a
// persistent message routed to a durable queue, after it was written to
// disk. A timeout, or a connection lost after the publish but before the
// confirm, leaves the outcome unknown: herald retries, and the consumer may
// see the message twice (RabbitMQ has no publish-side dedupe; consumers
// drop repeats by the webhook-id header, the delivery id, the same on every
// attempt).
//
// Connections: one AMQP connection per herald connection per node, dialled
// on first use with a timeout (DefaultDialTimeout) and outside any lock
// shared with other connections, so a broker that is down fails its own
// attempts (connection, timeout) and never holds other destinations'
// workers. After a failed dial the next dial waits for a backoff (from
// DefaultBackoffMin doubling to DefaultBackoffMax); attempts in between fail
// at once with the last dial error. A closed connection (broker restart) is
// redialled on next use; so is one whose URL or TLS settings changed.
//
// Channels: every publish in flight has a channel of its own, taken from a
// pool of idle confirm-mode channels (at most DefaultIdleChannels kept).
// RabbitMQ closes a channel on a channel-level error, such as a publish to
// a missing exchange; with a channel per publish that error fails only the
// attempt that caused it, never another subscription's publish sharing the
// channel. A closed channel is dropped and a new one opened on next use.
package amqpdest
