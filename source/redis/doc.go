// Package redissrc consumes a herald source from a Redis stream through a
// consumer group (XREADGROUP), acknowledging an entry (XACK) only after
// its event committed. It implements source.Consumer and source.Dialer.
//
// Setup: the group (Source.Group, default "herald") is created with
// MKSTREAM from the stream's start ("0") when missing, so the entries
// already in a new stream are consumed too. Each node is the consumer
// named after its node id; every node of a competing source reads the
// same group.
//
// A message is one entry: its "body" field is the body, its other fields
// are the headers (strings), the stream name is the route and the
// entry id's milliseconds are the timestamp. An entry without a body
// field (or whose content was deleted by XDEL/XTRIM while pending) is
// handed over with an empty body, so it is rejected as not_json and
// leaves the group like any other poison entry.
//
// The entry id is deliberately not the message id (Message.MessageID is
// empty): Redis assigns it, so it identifies a position, not a message.
// As an event id it would collide across streams and servers (two
// streams both have 1700000000000-0) and a producer's retried XADD would
// become a second event; the default event id is therefore the body's
// hash, as for a broker without message ids. A producer that sets an id
// field maps it explicitly (mapping "id": "headers.id").
//
// Reading: at start a consumer re-reads its own pending entries (ID "0",
// the ones a previous run of this node received but never acknowledged)
// until none is left, then new ones (">"), blocking at most readBlock per
// XREADGROUP so a cancelled context or a dead server is noticed.
// Entries another consumer left pending for longer than claimMinIdle (a
// node that died) are taken over with XAUTOCLAIM, checked every
// claimEvery. COUNT is the runner's batch (the source's prefetch), so at
// most prefetch entries are handed out per batch; the runner reads the
// next batch while the previous one commits and settles them in order,
// so at most two batches are pending on a consumer. XREADGROUP ">" hands
// out new entries whatever is pending, and the history cursor moves past
// what it returned, so reading ahead needs nothing of this package.
//
// Settling: the acknowledged ids in one XACK; each rejected entry is
// first copied with XADD to "<stream>:rejected" (fields body, reason,
// message, id: the entry id, and headers: its other fields as a JSON
// object when it had any) and acknowledged only once every copy
// succeeded, so a reject is never lost from Redis without its copy. The
// rejected stream is capped at about rejectedMaxLen entries (approximate
// MAXLEN): a poison flood cannot fill the server's memory.
//
// Close leaves unsettled entries in this consumer's pending list (Redis
// 7.0 has no negative acknowledgement): this node re-reads them when it
// dials again, and another node takes them over after claimMinIdle.
//
// Pending reports the group's lag (entries not yet delivered to the
// group) plus its pending entries (delivered, not acknowledged), from
// XINFO GROUPS; unknown when Redis cannot tell the lag (entries deleted
// from the middle of the stream).
//
// A Redis without persistence (as on a machine started with --save ""
// --appendonly no) loses the stream, the group and its pending list on a
// restart: the consumer's next read fails (connection closed, then
// NOGROUP), the runner dials again and the group is created anew on the
// empty stream. What the server lost is lost; herald cannot help it.
package redissrc
