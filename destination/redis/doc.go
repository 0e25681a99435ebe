// Package redisdest delivers to Redis Streams: each attempt is one XADD to
// the destination's stream, with approximate MAXLEN trimming when the
// destination sets maxlen.
//
// An entry's fields, in order: id (the webhook-id, i.e. the delivery id,
// the same on every attempt), type (the event type), timestamp (unix
// seconds, the signed webhook-timestamp), the signature headers under their
// header names (webhook-id, webhook-timestamp, webhook-signature,
// herald-event-type, herald-attempt and, for a tenanted event,
// herald-tenant), and body (the JSON envelope a webhook gets, byte for
// byte). A consumer verifies origin as a webhook receiver does: the three
// webhook-* fields are the headers, body the payload, the subscription's
// secret the key.
//
// Redis has no deduplication: when herald stops after Redis appended an
// entry but before the attempt was recorded, or the reply is lost on the
// way back, the next attempt appends the entry again. Consumers drop
// repeats by the id field. The XADD itself is never retried by the client
// (the engine's tiers retry), so there is no duplicate without a failure.
//
// One go-redis client (which pools its own connections) serves each
// herald connection on this node; it is replaced when the connection's URL
// or TLS settings change, and closed after 10 minutes unused. Every attempt is bounded by the subscription's
// timeout and the client dials with at most a 5 s timeout, reads and
// writes with at most 10 s, and never retries, so a Redis that is down
// fails attempts quickly as connection or timeout (retried through the
// tiers) and never holds workers of other destinations.
package redisdest
