// Package source consumes events from broker sources (issue 23): a
// RabbitMQ queue, a NATS JetStream durable consumer, a Redis stream's
// consumer group or an MQTT topic filter, each an operator-owned
// herald.Source on a named herald.Connection.
//
// The rule this package exists for: a message is acknowledged to its
// broker only after its event's group commit returned, through the same
// ingest path as POST /v1/events. A crash before the ack makes the broker
// redeliver; the event id (mapped, the broker's message id, or the
// SHA-256 of the body) makes the redelivery a duplicate, counted and not
// delivered again. A message that can never become an event (not JSON,
// too large, a mapping that yields no type, an event the API would refuse)
// is rejected without requeue and counted; it never stops the source. When
// the store refuses a commit, the consumer is closed without settling
// anything (the broker redelivers) and reopened after a backoff.
//
// Layout: consumer.go is the contract each broker package implements
// (source/amqp, source/nats, source/redis, source/mqtt) and the registry
// of dialers; convert.go turns a message into an event; runner.go dials
// and redials one source on one node; pipeline.go is its loop (receive,
// convert, commit, settle, two batches in flight); manager.go starts, restarts and stops the
// runners as sources change and holds the lease of ordered sources;
// status.go keeps the counters each node reports to the store.
package source
