// Package push is herald's Web Push service, wire-compatible with Mozilla's
// autopush: user agents (browsers) connect over WebSocket and register
// channels; application servers POST encrypted messages to the endpoints
// those channels were given (RFC 8030, RFC 8291 payloads, RFC 8292 VAPID).
//
// Parts:
//   - hub.go: the connection side of a node; it maps uaids connected to
//     this node to their *conn, one per WebSocket.
//   - conn.go: a session's struct, lifecycle (start, run, close, end,
//     teardown) and frame writes; frame.go: the WebSocket frame reader
//     and writer; readiness.go: the worker pool, the timer heap and the
//     events a session is run for; poll_linux.go: the epoll poller (ADR
//     0027: no goroutine per idle session); conn_state.go: its lifecycle
//     and storage-check states. The session's phases, split as autopush-rs splits its state machine:
//     conn_hello.go (unidentified: hello), conn_client.go (client messages:
//     register, unregister, ack, nack, broadcast_subscribe, ping),
//     conn_notify.go (server notifications: stored batches, direct
//     messages, their acks), conn_keepalive.go (WebSocket ping, pong
//     deadline, router record refresh); channelcache.go: the channels a
//     session knows registered, which the endpoint routes by.
//   - endpoint.go: POST /wpush/{v1,v2}/{token}, /wpush/{token} and
//     DELETE /m/{id}.
//   - router.go: node-to-node hand-off on the internal listener (PUT
//     /push/{uaid}, PUT /notif/{uaid}) and its client.
//   - token.go: Fernet endpoint tokens and message ids; vapid.go: VAPID
//     header parsing and verification; headers.go: TTL, Topic and crypto
//     headers; errors.go: the autopush JSON error body with errno.
//   - broadcast.go: broadcast versions (megaphone) from the store.
//
// Delivery rule, stronger than autopush's: a message handed to a connected
// user agent is acknowledged to the sender (201) only once the user agent
// has acked it or it has been stored, so killing a node loses no message a
// sender was told was accepted. See docs/adr/0008-web-push.md.
package push
