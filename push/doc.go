// Package push is herald's Web Push service, wire-compatible with Mozilla's
// autopush: user agents (browsers) connect over WebSocket and register
// channels; application servers POST encrypted messages to the endpoints
// those channels were given (RFC 8030, RFC 8291 payloads, RFC 8292 VAPID).
//
// Parts:
//   - hub.go, conn.go: the connection side. One *conn per WebSocket; the
//     hub maps uaids connected to this node to their conn.
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
