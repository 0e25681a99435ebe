// Package webhook makes one HTTP attempt of a delivery, safely, and says how
// it went. The delivery engine decides when to attempt and what to do with
// the Result; this package only sends, signs and classifies.
//
// # Signing
//
// Requests are signed with Standard Webhooks v1: webhook-id (the delivery id,
// the same on every retry), webhook-timestamp (Unix seconds of this attempt)
// and webhook-signature, "v1,<base64 HMAC-SHA256 of id.timestamp.body>", one
// space-separated entry per active secret so secrets rotate with overlap.
// Secrets are "whsec_" + base64 of 24 to 64 bytes (NewSecret makes 32). The
// official Standard Webhooks Go library verifies what Sign produces; the
// tests hold it to that and to the spec's test vector.
//
// # SSRF guard
//
// Guard runs as net.Dialer.Control, after DNS, on every address dialled, so
// neither an IP literal nor a name that resolves (or rebinds) to an internal
// address gets through. Link-local and cloud metadata addresses, multicast
// and unspecified addresses are always refused; loopback and private ranges
// only when the Guard allows them. The transport ignores HTTP(S)_PROXY,
// because through a proxy the Guard would only ever see the proxy.
//
// # Connections
//
// https:// requests go through net/http's Transport (TLS, HTTP/2 when
// offered). http:// requests take the direct path (direct.go, ADR 0017):
// HTTP/1.1 written and read on the calling goroutine over a pooled
// connection, without the Transport's two goroutines per connection and
// their hand-offs; Config.StdTransport turns it off. Both dial through the
// Guard, and both keep at most Config.MaxIdleConnsPerHost idle connections
// per destination.
//
// # What counts as delivered
//
// A 2xx answer whose body (read up to herald.ResponseReadLimit, 64 KiB) is
// complete within the request's timeout. Everything else fails with a
// herald.ErrorClass: 3xx (redirects are not followed) and other non-2xx are
// http_status, 410 is gone, and transport failures are timeout, dns, tls,
// connection or destination_forbidden. A timeout is a failure even if the
// receiver later finishes: the stable webhook-id lets it drop the retry.
// Retry-After on 429 and 503 is returned, clamped to 24 hours.
package webhook
