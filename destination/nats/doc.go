// Package natsdest is herald's NATS JetStream destination (with
// github.com/nats-io/nats.go/jetstream): a Publisher that publishes each
// attempt to the destination's subject and counts it delivered only once
// the stream acknowledged it (the PubAck).
//
// One attempt is one message on the subject: the headers of
// destination.NewMessage (webhook-id, webhook-timestamp, webhook-signature,
// herald-event-type, herald-attempt, herald-tenant) and the webhook body,
// with Nats-Msg-Id = the delivery id (webhook-id, the same on every
// attempt). JetStream drops a message whose Nats-Msg-Id it stored within
// the stream's duplicate window (StreamConfig.Duplicates, 2 minutes unless
// set) and acks it as a duplicate: an attempt re-sent because its PubAck was
// lost (a timeout, a broken connection, a crash of herald) is stored once.
// A retry later than the window can store a second copy; consumers drop it
// by webhook-id.
//
// Subject: the destination's subject, or by default one derived from the
// event type (Subject): the type's dot-separated tokens as they are, with
// every character NATS does not allow in a published subject replaced by
// "_": the wildcards "*" and ">", whitespace and control characters, and
// an empty token (a leading, trailing or doubled dot) becomes "_". So
// "order.created" publishes to order.created and "a..b>" to a._.b_ ("*"
// and ">" are replaced inside a token too, although NATS treats them as
// wildcards only as a whole token: the derived subject never depends on
// that subtlety). A configured subject is used as written and must be a
// valid publish subject (non-empty tokens, no whole-token wildcard, no
// whitespace; else the attempt fails as invalid_request).
//
// Outcomes:
//
//   - PubAck (also a duplicate's)          → delivered
//   - no stream holds the subject          → no_stream (retried)
//   - the stream refused it (an API error) → broker (retried)
//   - no PubAck within the timeout         → timeout
//   - server unreachable or reconnecting   → connection
//
// The client library's own retries are off (WithRetryAttempts(0)): the
// tiers retry. Connections: one NATS connection per herald connection per
// node, dialled on first use with a timeout (DefaultDialTimeout) outside any
// lock shared with other connections; after a failed dial, attempts fail at
// once until a backoff (DefaultBackoffMin doubling to DefaultBackoffMax)
// passes. A dialled connection reconnects by itself (forever, without
// buffering publishes meanwhile, so attempts fail fast as connection); a
// connection closed for good, or whose URL or TLS settings changed, is
// dialled again on next use.
package natsdest
