// Package destination sends one delivery attempt to a subscription's
// destination, whatever its type: Router picks the Publisher registered for
// herald.Destination.Type (the webhook Sender for webhooks, one package per
// broker and Web Push for the others) and implements delivery.Sender, so
// one engine — tiers, dead letters, ordering, throttling, alerts — drives
// every type.
//
// A broker message carries what a webhook carries (Message): the same JSON
// body, and the Standard Webhooks headers (webhook-id, webhook-timestamp,
// webhook-signature) plus herald-event-type and herald-tenant as the
// broker's headers, so a consumer verifies origin exactly as a webhook
// receiver does, with the subscription's secret.
//
// Broker packages resolve the operator-owned connection a destination names
// through Connections, keep one client per connection per node (Pool:
// dialled once at a time, backoff after failed dials, redialled when the
// URL or TLS settings change, closed when idle), and never
// return errors: every outcome, failure class included, is a
// webhook.Result. Adding a type (Kafka, say) is one package implementing
// Publisher and one Register call in cmd/herald.
package destination
