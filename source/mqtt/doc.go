// Package mqttsrc consumes an MQTT 5 topic filter as a herald source
// (source.Consumer, source.Dialer), on Mosquitto 2 or any MQTT 5 broker
// with shared subscriptions.
//
// Subscription: each node subscribes at QoS 1 to the shared subscription
// $share/herald/<topic> (Filter), so the broker hands each message to one
// node. A message published at QoS 0 arrives at QoS 0: it needs no
// acknowledgement and is lost if herald stops before committing it.
// Retained messages are never sent to a shared subscription.
//
// Session: the client id (ClientID) is stable per node and source,
// "herald-<node>-<source>-<hash>" (the hash covers node, source and topic,
// so a changed topic starts a fresh session), and the consumer connects
// with CleanStart false and a session expiry of SessionExpiry (1 h): the
// broker keeps the subscription while the node is away (a redial, a
// restart with the same node id) and queues the messages it routes to the
// session meanwhile, redelivering them, and the ones herald received but
// had not acknowledged, when the same client id connects again. An
// ordered source has one session whatever the node,
// "herald-<source>-<hash>": the node that takes the lease over takes the
// session over, with what the previous holder left unacknowledged.
//
// Limits that follow from MQTT and Mosquitto:
//
//   - Nothing is kept for a topic nobody subscribed to: messages
//     published before a source's first consumer subscribed are dropped by
//     the broker (the publisher's PUBACK says 0x10, no matching
//     subscribers).
//   - Mosquitto keeps at most max_queued_messages (1000 by default) per
//     session beyond those in flight, connected or not, and drops the
//     rest, silently for herald: a source whose nodes are all down (or
//     behind) by more than 1000 messages loses the excess. Raise
//     max_queued_messages (and max_queued_bytes) on the broker to cover
//     the longest outage.
//   - The broker routes to the session of every node that ever consumed a
//     source, connected or not, in turn (Mosquitto does not skip a
//     disconnected member of a shared subscription): a node that stops
//     for good keeps receiving its share for SessionExpiry, queued (up to
//     max_queued_messages) and then lost with the session. Give nodes a
//     stable id (herald serve --node-id) so a restarted node resumes its
//     sessions; a node id that changes at every start strands a share of
//     each source's messages at every restart. Ordered sources do not
//     have this problem (one session per source).
//   - Mosquitto before 2.0.19 does not save shared subscriptions: after
//     its restart the sessions come back with their messages but
//     unsubscribed. The consumer's connection dropped with the broker, so
//     the runner dials again (after its backoff) and subscribes again;
//     what is published in between reaches nobody (PUBACK 0x10, which a
//     publisher that needs a subscriber should retry).
//   - A session whose broker loses its state loses what it held:
//     Mosquitto saves sessions and their messages to its persistence file
//     at a clean exit and every autosave_interval (1800 s by default), not
//     at each PUBACK.
//
// Flow: the consumer connects with a Receive Maximum of
// DialParams.Prefetch (twice the source's prefetch: the runner receives
// the next batch while the previous one commits; acks stay in receive
// order, as MQTT requires, because the runner settles in order), so the broker should have at most that many QoS 1 messages
// unacknowledged at herald. Mosquitto before 2.0.13 does not hold that
// bound once messages queue (each PUBACK releases up to a Receive Maximum
// more: eclipse-mosquitto/mosquitto#2306), so the consumer also never
// returns more than prefetch unsettled messages; the surplus waits in its
// buffer and paho's (prefetch each), then in the socket.
//
// Message: Body is the payload, Headers the user properties (the first
// value of a name given twice), Route the topic, MessageID the
// correlation data (its text when it is UTF-8, else its hex; a producer
// sets it to a unique id to make redeliveries duplicates without a
// mapping), no Timestamp (MQTT has none). A user property such as
// message-id is reachable through the mapping (headers."message-id").
//
// Settle: MQTT has no negative acknowledgement, so rejected messages are
// acknowledged like acked ones (the runner has counted and recorded
// them); paho sends PUBACKs in receive order, as MQTT requires, within
// 10 ms of Settle. Pending is unknown (MQTT does not tell a session's
// backlog). When the connection drops Receive fails at once (the runner
// dials again and the session redelivers what was not acknowledged);
// Close disconnects normally, keeping the session.
//
// URLs: mqtt:// or tcp:// (port 1883 by default), mqtts://, ssl:// or
// tls:// (8883), ws:// or wss://; user and password from the URL; TLS
// from the connection's tls settings. Errors never include the URL.
package mqttsrc
