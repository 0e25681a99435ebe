// Package mqttdest delivers over MQTT 5: each attempt is one PUBLISH at
// QoS 1, and the attempt succeeds when the broker's PUBACK arrives with a
// reason code below 0x80 (0x10 "no matching subscribers" included: the
// broker took the message; nobody was subscribed, so unless it is
// retained it is gone — the result's excerpt says so).
//
// The message: the topic is the destination's, or by default the event
// type with every "." turned into "/" (MQTT's level separator) and every
// "+" or "#" into "_" (wildcards are not allowed in a publish topic), and
// a leading "$" (the broker's own topics, such as $SYS) into "_":
// "invoice.paid" publishes to "invoice/paid". A topic the API would refuse
// (herald.CheckMQTTTopic: empty, a wildcard, a leading "$", control
// characters, over herald.MaxBrokerNameBytes) fails the attempt as
// invalid_request before anything is sent. The payload is the JSON
// envelope a webhook gets, the content type application/json, and the
// signature headers (webhook-id, webhook-timestamp, webhook-signature,
// herald-event-type, herald-attempt and, for a tenanted event,
// herald-tenant) are MQTT 5 user properties, so a consumer verifies origin
// as a webhook receiver does. retain sets the PUBLISH retain flag.
//
// A PUBACK reason code of 0x80 or above (not authorized, quota exceeded,
// topic name invalid, ...) fails the attempt as broker, with the reason;
// it is retried through the tiers.
//
// A PUBACK is not a disk write: Mosquitto acknowledges a QoS 1 message once
// it holds it in memory, and with persistence on it writes its database
// every autosave_interval (default 1800 s) or at a clean exit. A broker
// that crashes loses what it acknowledged since, and herald has already
// counted it delivered. Mosquitto 2.0 saves only the sessions of clients
// that connected with CleanStart false; a subscriber that connected clean
// loses its subscription at a restart, and what is published before it
// subscribes again goes nowhere.
//
// MQTT has no deduplication either: when the connection drops after the
// broker took a message but before its PUBACK reached herald, the attempt
// fails and the next one publishes the message again. Consumers drop
// repeats by the webhook-id user property.
//
// One client (autopaho connection manager) serves each herald connection
// on this node, with the client id "herald-<node>-<connection>" (node:
// Config.NodeID, by default the host name and a random suffix chosen at
// start, so two nodes, or two processes on one host, never take over each
// other's session). It starts clean, keeps no session after a disconnect,
// reconnects with an exponential backoff from 250 ms to 10 s, and is
// replaced when the connection's URL or TLS settings change, and closed
// after 10 minutes unused. While it is down attempts fail at once with the
// last connect error and its class (connection; tls, dns or timeout; broker
// when the broker refused the CONNECT); an attempt waits for the PUBACK at
// most the subscription's timeout, then fails as timeout, and fails at once
// as connection when the connection drops first (the session ends with it,
// so no PUBACK can come).
package mqttdest
