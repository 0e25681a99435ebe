// Package delivery runs herald's retry tiers: it claims due deliveries from
// the store, sends them through a webhook.Sender, and records the outcomes.
//
// Tiers: tier i has a maturity delay d[i]. A delivery entering tier i
// becomes due at entered + d[i]; attempt n is made from tier n-1. A failure moves the delivery to tier i+1, or to the dead
// letters after the last tier, in the same transaction that records the
// attempt, so a delivery is never visible in two tiers.
//
// Workers: Workers is the number of concurrent requests a node makes. Each
// tier gets at least one slot (when there are at least as many slots as
// tiers); the rest are spread over tiers weighted by their due backlog + 1
// (a weighted random choice), re-evaluated every Rebalance interval. New work therefore never waits behind a retry backlog.
//
// Leases: a claim leases deliveries until now + timeout + LeaseMargin. Every
// node rescues, each LivenessInterval, the leases of nodes the store knows
// dead (store/liveness.go: a crashed node's work, resumed in about a
// second), and each RescueInterval expired leases (the fallback for a node
// alive but stuck). On Stop a
// node stops claiming, lets running requests finish for up to
// ShutdownTimeout, releases what it still holds, and flushes its outcomes.
//
// Completion is batched: outcomes are queued to a completer that writes them
// with DeliveryCompleteMany, many per transaction. If the store is down the
// completer keeps retrying; should the process die first, its leases are
// rescued and the deliveries are attempted again — a duplicate, never a loss.
package delivery
