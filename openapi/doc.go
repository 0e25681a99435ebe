// Package openapi holds herald's OpenAPI 3.1 document, openapi.json: the one
// source of truth for the HTTP contract, written by hand and checked against
// the code rather than generated from it (docs/adr/0011-openapi.md says why).
//
// The document is embedded in the binary and served by Handler at
// GET /openapi.json (no auth). docs/openapi.json is a byte-identical copy
// for readers of the repository, refreshed by `go generate ./openapi` (or
// `make openapi`); a test fails when the copy differs.
//
// Two tests keep the document honest:
//   - the drift test compares every route the API and push routers register
//     (httpapi.Patterns, push.Server.Patterns) with the document's paths, in
//     both directions;
//   - package openapitest validates requests and answers against the
//     schemas, and httpapi's test client runs every request of its tests
//     through it.
//
// Mapping from ServeMux patterns to OpenAPI paths: a pattern without a
// method is GET (only the push WebSocket has none), "{name...}" is
// "{name}" (the parameter carries "x-herald-multi-segment": true),
// "/{$}" is "/", and a pattern ending in "/" (a subtree, like /ui/) is
// documented as that path.
package openapi

//go:generate cp openapi.json ../docs/openapi.json
