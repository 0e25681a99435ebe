package store

import "time"

// StatsGetParams are the inputs of StatsGet.
type StatsGetParams struct {
	// Tiers is the number of configured tiers; the result has one entry for
	// each, even when empty, and also one for every further tier that holds
	// a pending or in-flight delivery (the configuration shrank; see
	// DeliveryTierClamp), so no work is invisible.
	Tiers int
	Now   time.Time
}

// Stats counts deliveries.
type Stats struct {
	// Tiers are in tier order, without gaps: entry i is tier i.
	Tiers []TierStats
	Dead  int64
	// DeliveredTotal is a running count of delivered outcomes: it never
	// goes down (not when a delivered delivery is retried, nor when
	// retention deletes delivered rows), and a delivery delivered twice
	// counts twice.
	DeliveredTotal int64
	// Skipped and Superseded count deliveries finished without a send by
	// the "latest" ordering rule (current rows in those states).
	Skipped    int64
	Superseded int64
	// Throttled counts due pending deliveries (any tier) of subscriptions
	// that have no budget at Now: paused, at their rate limit or at their
	// max_in_flight.
	Throttled int64
}

// TierStats are one tier's counts.
type TierStats struct {
	Tier int
	// Pending counts every pending delivery of the tier, due or not,
	// claimable or not.
	Pending  int64
	InFlight int64
	// Due is the claimable backlog: pending deliveries whose
	// next_attempt_at <= Now and that a claim at Now could take as far as
	// their subscription goes — enabled, not deleted, not paused, and for
	// a rate- or in-flight-limited subscription at most its remaining
	// budget. It weights worker assignment and drives the staleness alarm,
	// so work no claim can take never draws workers away from work one
	// can. (Keyed deliveries of fifo and latest subscriptions count in
	// full: they are claimable one after another.)
	Due int64
	// Held counts the other due pending deliveries: of disabled, deleted
	// or paused subscriptions, or beyond their subscription's budget. Due
	// + Held is every pending delivery with next_attempt_at <= Now.
	Held int64
	// OldestPendingAge is Now minus the earliest next_attempt_at of the
	// deliveries counted in Due (0 if none).
	OldestPendingAge time.Duration
}

// NewStats returns Stats with one empty entry per configured tier.
// Backends fill it through Tier, which adds the entries of tiers beyond
// the configured ones, so both report the same tiers.
func NewStats(tiers int) *Stats {
	st := &Stats{Tiers: make([]TierStats, max(tiers, 0))}
	for i := range st.Tiers {
		st.Tiers[i].Tier = i
	}
	return st
}

// Tier returns the entry of tier i (i >= 0), adding empty entries up to it
// when i is beyond the configured tiers.
func (st *Stats) Tier(i int) *TierStats {
	for len(st.Tiers) <= i {
		st.Tiers = append(st.Tiers, TierStats{Tier: len(st.Tiers)})
	}
	return &st.Tiers[i]
}

// Claimable splits a subscription's due count in a tier into what a claim
// can take (Due) and the rest (Held): live says the subscription is
// enabled and not deleted; budget is how many more requests it may start
// (0 while paused, math.MaxInt when unlimited).
func Claimable(due int64, live bool, budget int) (claimable, held int64) {
	if !live {
		return 0, due
	}
	claimable = min(due, int64(max(budget, 0)))
	return claimable, due - claimable
}
