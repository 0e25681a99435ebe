// Package eventtype compiles the JSON Schemas of the event type catalog
// (herald.EventType) and checks events against them.
//
// A schema is hostile input until it compiled: Compile refuses every
// reference that leaves the document (no http, no file, nothing but the
// embedded meta-schemas), its size is bounded by
// herald.MaxEventTypeSchema before it gets here, and a panic inside the
// compiler is an invalid schema, never a crash.
//
// Catalog is the per-node cache the publish paths (POST /v1/events, the
// batch endpoint, sources) consult: it holds the compiled schemas of the
// types with Validate set and polls the store's event types version at
// most once per poll interval, so a publish pays no database round trip
// for it; a write through this node's API invalidates it at once.
package eventtype
