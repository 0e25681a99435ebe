// Package natssrc consumes a herald source from a NATS JetStream stream
// (with github.com/nats-io/nats.go/jetstream): Dial is its source.Dialer.
//
// The stream must exist; herald never creates or changes a stream, and a
// missing one is a dial error that says so. On it, Dial creates the
// durable pull consumer Source.Durable ("herald" by default), or updates
// it to herald's settings when it exists: explicit acks, MaxAckPending =
// DialParams.Prefetch (twice the source's prefetch: the runner receives
// the next batch while the previous one commits), AckWait = ackWait, FilterSubject = Source.Subject
// when set, and the server's defaults otherwise (a new durable delivers
// the whole stream, redelivers without limit). Every node of the cluster
// pulls from the same durable, so the nodes share its messages, and its
// MaxAckPending bounds the unacknowledged messages over all of them.
//
// Each consumer has its own NATS connection. Messages arrive through the
// client's pull iterator, asking for at most prefetch messages at a time;
// the server never has more than MaxAckPending outstanding, so a message
// waits in the client's buffer (its AckWait running) for at most two
// batches' commits. Receive blocks for the first message, then takes what
// already arrived, up to max.
//
// Message: Body = the payload, Headers = the first value of each header,
// Route = the subject, MessageID = the Nats-Msg-Id header, Timestamp =
// when the stream stored it.
//
// Settle acks with Ack and rejects with Term (never redelivered; JetStream
// keeps no dead letters, so a rejected message is only in herald's recent
// rejects), then flushes the connection: the server has answered a PING
// sent after the acks, so it received them. That is one round trip per
// batch instead of one per message (DoubleAck); an ack the server still
// loses (it crashes before applying it) only means a redelivery, which
// becomes a duplicate by the event id. Close Naks every message it
// received and did not settle, with a delay (nakDelay, 6 s) that
// outlasts its own pull requests still queued on the server (nats-server
// 2.9 mishandles a redelivery aimed at a pull whose client is gone), so
// the stream redelivers them sooner than AckWait (30 s).
//
// Failures: the client reconnects by itself for a while (reconnectWait ×
// maxReconnects); the iterator then pulls again on the new connection. A
// connection that gives up, a pull whose heartbeats stop (pullHeartbeat)
// and a deleted consumer make Receive return an error, so the runner
// dials again: Receive never waits on a dead connection.
package natssrc
