// Package ingest turns published events into stored events and deliveries.
//
// Fan-out: every event is matched against the enabled subscriptions (event
// type globs, then the compiled content filter) and one delivery per match is
// written in the same transaction as the event. The subscription set is
// cached in memory and reloaded whenever the store's subscriptions version
// changes (only changed filters are compiled again); Retry-After pauses,
// which direct dispatch needs, have a version of their own and reload
// alone. Both versions are read once per commit batch, so a subscription
// created (or paused) on another node is seen by the next batch.
//
// Group commit: single-event publishes are gathered by committer goroutines
// into one transaction (up to MaxBatch events; a batch also closes after
// FlushInterval). Each caller is answered only after its batch committed; a
// failed commit answers every caller in that batch with the error and leaves
// nothing behind. While one batch commits, the next one fills, so batching
// grows with load and costs no latency when idle.
//
// System events (herald.*) are delivered only to subscriptions that name a
// herald.* pattern explicitly: a blanket subscription does not receive
// herald's alerts unless it asks for them.
package ingest
