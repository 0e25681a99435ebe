package store

import (
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald"
)

// This file holds the inputs and results of the queries behind the
// operator surface (dashboard, CLI): listings and counts that are read
// rarely and never on the delivery path.

// EventListParams are the filters of EventList. Zero values do not filter.
type EventListParams struct {
	// Type is an event-type pattern as subscriptions take it (see
	// herald.MatchEventType), one herald.CheckEventTypePattern accepts;
	// Key and Tenant are exact matches. An empty one does not filter.
	Type   string
	Key    string
	Tenant string
	// Since (inclusive) and Until (exclusive) bound created_at.
	Since, Until time.Time
	// ExcludeSystem leaves out herald's own events (types herald.*, see
	// herald.IsSystemEventType).
	ExcludeSystem bool
	// Limit is at most 1000; 0 means 100.
	Limit int
	// After continues a listing after this event (the last one of the
	// previous page); nil starts at the newest (the oldest with Oldest).
	After *EventCursor
	// Oldest lists oldest first instead (replay walks a window in publish
	// order); After then continues after this event in that order.
	Oldest bool
}

// EventCursor is a position in EventList's order: event ids may be chosen
// by producers, so the order is created_at then id, not the id alone.
type EventCursor struct {
	CreatedAt time.Time
	ID        string
}

// EventListResult is one page, newest first (oldest first with Oldest).
type EventListResult struct {
	Events []*herald.Event
	More   bool
}

// DeadLetterGroupListParams are the filters of DeadLetterGroupList.
type DeadLetterGroupListParams struct {
	// SubscriptionID, when set, counts only that subscription's dead letters.
	SubscriptionID string
	// Tenant, when set, counts only dead letters of that tenant's
	// subscriptions.
	Tenant string
}

// DeadLetterGroup is the dead letters of one subscription whose last
// attempt failed with one error class.
type DeadLetterGroup struct {
	SubscriptionID string
	Error          herald.ErrorClass
	Count          int
	// OldestAt and NewestAt are when the first and last of them died.
	OldestAt, NewestAt time.Time
}

// SubscriptionStatsListParams are the inputs of SubscriptionStatsList.
type SubscriptionStatsListParams struct {
	// Since bounds the finished deliveries counted (by updated_at).
	Since time.Time
	// Tenant, when set, counts only that tenant's subscriptions.
	Tenant string
}

// SubscriptionStats is one subscription's recent outcomes and queue.
type SubscriptionStats struct {
	SubscriptionID string
	// Delivered and Dead count deliveries that finished so at or after
	// Since.
	Delivered, Dead int
	// Pending and InFlight count the queue now.
	Pending, InFlight int
}

// SubscriptionStatsAdd adds n deliveries in state to st (the stores' shared
// tally of SubscriptionStatsList rows).
func SubscriptionStatsAdd(st *SubscriptionStats, state herald.DeliveryState, n int) {
	switch state {
	case herald.DeliveryDelivered:
		st.Delivered += n
	case herald.DeliveryDead:
		st.Dead += n
	case herald.DeliveryPending:
		st.Pending += n
	case herald.DeliveryInFlight:
		st.InFlight += n
	}
}

// SubscriptionStatsSorted returns the tallies ordered by subscription id.
func SubscriptionStatsSorted(byID map[string]*SubscriptionStats) []*SubscriptionStats {
	out := make([]*SubscriptionStats, 0, len(byID))
	for _, st := range byID {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *SubscriptionStats) int { return strings.Compare(a.SubscriptionID, b.SubscriptionID) })
	return out
}
