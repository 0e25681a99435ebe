// Package herald holds the domain types of herald, a self-hosted notification
// delivery service: events, subscriptions, deliveries and their attempts, the
// errors every layer shares, and small helpers (ids, globs) that have no
// dependency of their own.
//
// Implementations live in subpackages named after their concern or dependency:
// store/sqlite and store/postgres (storage), filter (CEL, JMESPath, ES query
// DSL), ingest (fan-out and commit), delivery (tiers, claims, workers, sender),
// httpapi (the REST API). cmd/herald wires them together; no package below it
// reads flags or the environment.
package herald
