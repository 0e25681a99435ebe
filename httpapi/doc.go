// Package httpapi serves herald's REST API (v1), its health probes and the
// Prometheus endpoint. The contract is docs/api.md and docs/openapi.json;
// acceptance tests drive herald through it, so response shapes and error
// codes here are stable.
//
// Layout: New builds one http.ServeMux with Go 1.22 method patterns. Every
// /v1/ route sits behind bearer-token auth; /healthz, /readyz and /metrics
// are open. Handlers return errors instead of writing them: one table
// (codeStatus in errors.go) maps each herald.Code to its HTTP status, and
// writeError is the only place that renders an error body or logs an
// unexpected cause, so every failure is logged exactly once, at the edge.
//
// Files: server.go holds Config, New and the route table. Each resource
// has one file with its decoders, views and handlers: event.go,
// subscription.go (its secrets in subscription_secret.go), delivery.go,
// deadletter.go, filter.go, stats.go, token.go, portal.go and push.go;
// health.go and metrics.go serve the open endpoints. Shared by all:
// decode.go and jsonvalid.go (reading a body and its JSON), page.go
// (listing parameters), reply.go and errors.go (answers), tenant.go
// (tenant confinement), auth.go and scope.go (tokens and scopes),
// redact.go (receiver credentials) and deadline.go (ReadDeadline).
//
// Input is decoded field by field (decode.go) rather than into a struct with
// encoding/json's DisallowUnknownFields: that way every error — a wrong type,
// an unknown key, a failed validation — names its JSON path in "field"
// ("rate_limit.max", "events[3].type"), which the stock decoder cannot do
// for nested objects. Request bodies are capped (Config.MaxBodyBytes,
// Config.MaxBatchBodyBytes, lower limits for routes with small bodies)
// before they are read, are allocated as they arrive rather than at their
// announced length, and must arrive within a deadline (ReadDeadline).
//
// Handlers are safe for concurrent use; the package holds no state besides
// the token cache of TokenAuth.
package httpapi
