// Package amqpsrc consumes a herald.Source of type amqp: an existing
// RabbitMQ queue, read with github.com/rabbitmq/amqp091-go.
//
// Each consumer owns one connection and one channel (plus a second channel
// on the same connection for the queue depth, so that a failing depth
// query never closes the consuming channel). Dial declares the queue
// passively (herald never creates or changes it: a missing queue is a dial
// error the source status shows), sets basic.qos to DialParams.Prefetch
// (twice the source's prefetch: the runner receives the next batch while
// the previous one commits), and consumes with manual acks under a
// consumer tag naming the node.
//
// Settle acks what was committed and rejects poison with
// basic.nack(requeue=false), so the queue's dead-letter exchange, when it
// has one, keeps them (without one RabbitMQ drops them). Close closes the
// connection: RabbitMQ requeues every unacked message and redelivers it
// with the redelivered flag set; its event id makes it a duplicate.
//
// Message fields: Body, Headers (the AMQP headers table, values as
// strings), Route (the routing key), MessageID (the message_id property),
// Timestamp (the timestamp property, second precision, when set).
package amqpsrc
