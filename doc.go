// Package herald holds the domain types of herald, a self-hosted notification
// delivery service: events, subscriptions, deliveries and their attempts, the
// errors every layer shares, and small helpers (ids, globs) that have no
// dependency of their own.
//
// Implementations live in subpackages, one per concern or dependency; none
// of them reads flags or the environment, and only cmd/herald wires them
// together:
//
//	store              the storage contract, and the rules both backends share
//	store/sqlite       the embedded backend (one node, one file)
//	store/postgres     the backend for several nodes sharing one database
//	store/storetest    the conformance suite both backends pass
//	filter             content filters: CEL, JMESPath, Elasticsearch query DSL
//	ingest             publish: fan-out to subscriptions and the commit
//	delivery           retry tiers, claims, workers and outcomes
//	webhook            one signed HTTP attempt, the SSRF guard, classification
//	push               the Web Push service (autopush-compatible WebSocket side)
//	maintenance        one-node-at-a-time work: retention, the staleness alarm
//	metrics            Prometheus collectors and the dashboard's history
//	seal               secrets at rest (AES-256-GCM key ring)
//	httpapi            the REST API, health probes and /metrics
//	ui                 the dashboard's embedded files and their handler
//	openapi            the hand-written OpenAPI document and its handler
//	openapi/openapitest  checks every test exchange against that document
//	client             a typed Go client of the /v1 API (the CLI uses it)
//	bench              the `herald bench` load generator and its report
//	cmd/herald         the binary: flags, wiring, CLI commands
//	internal/testdb    fresh migrated stores for tests (SQLite and PostgreSQL)
//	internal/testcert  hostile TLS certificates for tests
//	internal/testlog   a log sink tests can read while others write
//
// The layering is checked by `make lint` (depguard rules in .golangci.yml).
package herald
