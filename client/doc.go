// Package client is a small typed Go client for herald's /v1 HTTP API:
// subscriptions, events (single, batch, search), deliveries, dead letters
// (groups and redrive), filter and subscription tests, stats and the
// Prometheus /metrics.
//
// Every method takes a context and returns either the decoded answer or an
// error of one of two kinds:
//
//   - *APIError: the server answered with an error body
//     ({"error": {"code", "message", "field"}}); Code and Message are shown
//     to users as they are. errors.Is(err, client.ErrNotFound) and the other
//     Err* values match on the code.
//   - *ConnError: no answer was received (connection refused, DNS, TLS,
//     a reset). It wraps the transport's error.
//
// A cancelled context returns the context's error unwrapped-to
// (errors.Is(err, context.Canceled) holds), never a ConnError.
//
// The herald CLI (herald subscriptions …, herald events …) is built on this
// package; docs/api.md documents the JSON shapes the types mirror.
package client
