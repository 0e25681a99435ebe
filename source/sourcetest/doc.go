// Package sourcetest is the conformance suite every broker source runs
// against its real server (as destination/desttest does for
// destinations): Run takes a Harness that adapts one broker, and drives a
// real source.Manager committing through a real ingest.Ingester into a
// SQLite store.
package sourcetest
