package store

import (
	"time"

	"github.com/heraldhq/herald"
)

// Per-key ordering (subscriptions with ordering fifo or latest).
//
// Deliveries carry their event's key and version (EventKey, EventVersion).
// For a subscription whose ordering is fifo or latest, the deliveries of
// one non-empty key form a sequence in publish order. Deliveries without a
// key are unordered in every mode, and a subscription with ordering none is
// claimed exactly as if keys did not exist.
//
// Publish order is a position the database assigns when it stores the
// delivery (its seq, migration 006), never a node's clock: created_at comes
// from the inserting node, and with clock skew between nodes it would
// reorder a key. Within one EventInsertMany call, positions follow the
// input order. SQLite takes positions from a counter in the single
// writer's transaction, so its publish order is commit order. PostgreSQL
// takes them from a sequence when the rows are inserted, not when they
// commit: two publishes whose transactions overlap may commit in the other
// order than their positions, so a key's order between two such
// concurrent (unacknowledged) publishes is either one. An event whose
// publish was acknowledged before another publish began always comes
// first, whatever the nodes' clocks say. Deliveries stored before
// migration 006 all have position 0 and keep their old order among
// themselves, (created_at, id), before every later one: the full position
// is (seq, created_at, id), and only the first part decides for new rows.
//
// Per-key state lives in the store (one row per subscription and key):
// the delivery holding the key (its lock: set when the delivery is
// claimed, cleared in the same transaction that completes, releases or
// rescues it), the last delivered version, and the time of the last send.
// A backend that cannot read or write that state claims nothing: there is
// no "send without the lock". The rules below hold across nodes
// (PostgreSQL locks the key's row in the claim transaction).
//
// Both modes:
//   - One at a time: while a delivery of the key is in flight (holds the
//     key), no other delivery of the key is claimed, in any tier.
//   - Key interval: when the subscription's KeyIntervalMS > 0, a delivery
//     of the key is not claimed before the previous claim of that key plus
//     KeyIntervalMS (the spacing is measured between send starts).
//   - An expired lease frees the key when DeliveryRescue makes the delivery
//     pending again; DeliveryRelease frees it too.
//
// fifo:
//   - Only the head of the key is claimable: the earliest unfinished
//     (pending or in_flight) delivery in publish order, whatever tier it
//     waits in. A later delivery waits while the head waits in a retry
//     tier, and becomes the head when the head finishes (delivered, dead,
//     cancelled, …). A delivery put back by DeliveryRetry or
//     DeadLetterRedrive takes its original publish position again.
//
// latest (newest version wins):
//   - The version of a delivery is its event version. An event with a key
//     but no version is versioned by publish order: it is compared only
//     with the key's other versionless deliveries, newer = published later
//     (do not mix versioned and versionless events on one key; if you do,
//     the two kinds are ordered independently, still one at a time).
//   - Last delivered version: the maximum version (and, for versionless
//     deliveries, the latest publish position) among the key's deliveries
//     that were delivered. A failed older attempt never lowers it.
//   - Skip: a pending delivery whose version is not greater than the last
//     delivered version becomes skipped (finished, never sent).
//   - Supersede: a pending delivery older than another unfinished (pending
//     or in flight) delivery of the key becomes superseded (finished, never
//     sent), whatever tier either waits in; the newest one is sent.
//   - Skip and supersede are applied by DeliveryClaim, in the claim
//     transaction, for the keys it examines (keys with a due delivery in
//     the tier claimed); until then such deliveries stay pending.

// WaitingFor is why a pending delivery is not being sent yet.
type WaitingFor string

const (
	// WaitingForNothing: not waiting (claimable now, or not pending).
	WaitingForNothing WaitingFor = ""
	// WaitingForKey: its key is held by another delivery, an earlier
	// delivery of the key (fifo) must finish first, or the key interval
	// has not elapsed.
	WaitingForKey WaitingFor = "key"
	// WaitingForMaturity: its tier's maturity time (next_attempt_at) is in
	// the future.
	WaitingForMaturity WaitingFor = "maturity"
)

// DeliveryWaitingForParams are the inputs of DeliveryWaitingFor.
type DeliveryWaitingForParams struct {
	ID  string
	Now time.Time
}

// KeyState is one key's stored ordering state, as a backend read it. It is
// the input of PlanKey (a helper both backends share, so the rules above
// are written once).
type KeyState struct {
	// Held: a delivery of the key is in flight (the key's lock).
	Held bool
	// LastVersion is the highest delivered version (nil: none delivered).
	LastVersion *int64
	// LastPosSeq/LastPosAt/LastPosID is the publish position (seq,
	// created_at, id) of the newest delivered versionless delivery
	// (zero/"" when none; LastPosID is set whenever one was delivered).
	LastPosSeq int64
	LastPosAt  time.Time
	LastPosID  string
	// LastSentAt is when a delivery of the key was last claimed.
	LastSentAt *time.Time
}

// KeyDelivery is one unfinished (pending or in_flight) delivery of a key.
type KeyDelivery struct {
	ID            string
	State         herald.DeliveryState
	Tier          int
	NextAttemptAt *time.Time
	Version       *int64
	// Seq, CreatedAt and ID are its publish position (see the top of this
	// file): Seq decides; CreatedAt and ID only order the deliveries stored
	// before migration 006 (Seq 0).
	Seq       int64
	CreatedAt time.Time
}

// KeyPlan is what PlanKey decided for a key.
type KeyPlan struct {
	// Skip and Supersede are pending deliveries to finish without a send.
	Skip, Supersede []string
	// Next is the delivery to send next (pending), whatever its tier and
	// due time; "" when none.
	Next string
	// NextTier and NextDue are Next's tier and next_attempt_at.
	NextTier int
	NextDue  time.Time
	// Blocked: the key is held or its interval has not elapsed at Now, so
	// nothing of it may be claimed now.
	Blocked bool
}

// PlanKey applies the ordering rules (see the top of this file) to one
// key. rows are the key's unfinished deliveries in publish order.
func PlanKey(ordering herald.Ordering, interval time.Duration, st *KeyState, rows []KeyDelivery, now time.Time) KeyPlan {
	var plan KeyPlan
	plan.Blocked = st.Held || (interval > 0 && st.LastSentAt != nil && now.Before(st.LastSentAt.Add(interval)))
	if ordering == herald.OrderingFIFO {
		if len(rows) > 0 && rows[0].State == herald.DeliveryPending {
			plan.setNext(&rows[0])
		}
		return plan
	}
	// latest: skip what is not newer than the last delivered version, then
	// keep the newest of each scale (versioned, versionless).
	var bestV, bestU *KeyDelivery
	skipped := make(map[string]bool)
	for i := range rows {
		r := &rows[i]
		if r.State == herald.DeliveryPending && !newerThanDelivered(r, st) {
			skipped[r.ID] = true
			plan.Skip = append(plan.Skip, r.ID)
			continue
		}
		if r.Version != nil {
			// Rows are in publish order: on equal versions the later
			// one wins.
			if bestV == nil || *r.Version >= *bestV.Version {
				bestV = r
			}
		} else {
			bestU = r
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.State != herald.DeliveryPending || skipped[r.ID] || r == bestV || r == bestU {
			continue
		}
		plan.Supersede = append(plan.Supersede, r.ID)
	}
	// Of the (at most two) winners, the one published first goes first.
	for i := range rows {
		r := &rows[i]
		if (r == bestV || r == bestU) && r.State == herald.DeliveryPending {
			plan.setNext(r)
			break
		}
	}
	return plan
}

func (p *KeyPlan) setNext(r *KeyDelivery) {
	p.Next, p.NextTier = r.ID, r.Tier
	if r.NextAttemptAt != nil {
		p.NextDue = *r.NextAttemptAt
	}
}

// Claimable reports whether the plan's Next may be claimed now in tier.
func (p *KeyPlan) Claimable(tier int, now time.Time) bool {
	return p.Next != "" && !p.Blocked && p.NextTier == tier && !p.NextDue.After(now)
}

func newerThanDelivered(r *KeyDelivery, st *KeyState) bool {
	if r.Version != nil {
		return st.LastVersion == nil || *r.Version > *st.LastVersion
	}
	if st.LastPosID == "" {
		return true
	}
	if r.Seq != st.LastPosSeq {
		return r.Seq > st.LastPosSeq
	}
	if !r.CreatedAt.Equal(st.LastPosAt) {
		return r.CreatedAt.After(st.LastPosAt)
	}
	return r.ID > st.LastPosID
}

// WaitingReason is DeliveryWaitingFor's rule for a pending delivery d
// (backend helper): plan is PlanKey's answer for d's key, or nil when d is
// unordered (no key, or its subscription's ordering is none).
func WaitingReason(d *herald.Delivery, plan *KeyPlan, now time.Time) WaitingFor {
	if d.State != herald.DeliveryPending {
		return WaitingForNothing
	}
	if plan != nil && (plan.Blocked || plan.Next != d.ID) {
		return WaitingForKey
	}
	if d.NextAttemptAt != nil && d.NextAttemptAt.After(now) {
		return WaitingForMaturity
	}
	return WaitingForNothing
}
