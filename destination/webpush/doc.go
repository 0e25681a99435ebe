// Package webpushdest sends herald's deliveries to browsers as Web Push
// messages: the "webpush" destination type. herald owns the sender rather
// than using webpush-go, which pads every message to 4096 bytes, fixes the
// JWT lifetime at 12 hours, writes into the caller's payload (a race when
// one event goes to many subscriptions) and has no timeout.
//
// One attempt: the webhook JSON body is encrypted for the subscription's
// keys as one aes128gcm record with no padding beyond the delimiter
// (RFC 8291, Encrypt), signed for the push service with herald's VAPID key
// (RFC 8292: Authorization: vapid t=<ES256 JWT>, k=<public key>; the JWT
// is cached per origin until an hour before its 12-hour exp), and POSTed
// to the endpoint with TTL, Urgency and Topic (RFC 8030) through the
// webhook Sender's guarded client (SSRF guard, timeout). The answer:
//
//   - 2xx: delivered.
//   - 404, 410: ErrorGone, so the engine disables the subscription and
//     raises herald.subscription.disabled.
//   - 413, or a payload over MaxPlaintext (3993 bytes): ErrorPayloadTooLarge,
//     permanent (dead at once).
//   - 400, 401, 403: ErrorRejected, permanent, with the push service's text.
//   - 429, 503 with Retry-After: the subscription pauses, as for webhooks.
//   - other statuses and network errors: retried through the tiers.
//
// The VAPID key pair is one per installation, kept by the store
// (store.VAPIDStore) and handed in as a KeySource by cmd/herald (a
// destination package reaches no store).
package webpushdest
