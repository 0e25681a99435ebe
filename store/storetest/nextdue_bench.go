package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// BenchmarkOrderedNextDue times DeliveryNextDue while a fifo subscription
// has a backlog of due deliveries whose keys are all taken: 100 keys, each
// with its head in flight and the rest of its deliveries due behind it.
// This is the state in which the engine asks (after a claim that came back
// short); the answer should not cost more as the backlog grows.
func BenchmarkOrderedNextDue(b *testing.B, newStore func(b *testing.B) store.Store) {
	const keys = 100
	for _, backlog := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			ctx := b.Context()
			s := newStore(b)
			sub := newSubscription(func(s *herald.Subscription) {
				s.Ordering, s.KeyIntervalMS, s.RateLimit, s.MaxInFlight = herald.OrderingFIFO, 0, nil, 0
				s.Filter, s.EventTypes = nil, nil
			})
			if _, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: newSecret(), Now: now}); err != nil {
				b.Fatal(err)
			}
			events := make([]store.EventInsert, 0, 1000)
			flush := func() {
				if _, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: events, Now: now}); err != nil {
					b.Fatal(err)
				}
				events = events[:0]
			}
			for i := range backlog {
				at := now.Add(time.Duration(i) * time.Microsecond)
				events = append(events, store.EventInsert{
					Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "doc.updated", Key: fmt.Sprintf("key-%03d", i%keys),
						Data: json.RawMessage(`{}`), CreatedAt: at},
					Deliveries: []store.DeliveryInsert{{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: at}},
				})
				if len(events) == cap(events) {
					flush()
				}
			}
			if len(events) > 0 {
				flush()
			}
			at := now.Add(time.Second)
			claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
				Tier: 0, Limit: 2 * keys, Now: at, LeaseOwner: ownerA, LeaseUntil: at.Add(time.Hour),
			})
			if err != nil {
				b.Fatal(err)
			}
			if len(claimed) != keys {
				b.Fatalf("claimed %d heads, want %d", len(claimed), keys)
			}
			b.ResetTimer()
			for b.Loop() {
				next, err := s.DeliveryNextDue(ctx, &store.DeliveryNextDueParams{Tier: 0, Now: at})
				if err != nil {
					b.Fatal(err)
				}
				if next != nil {
					b.Fatalf("next due %v: every due delivery waits for its key", next)
				}
			}
		})
	}
}
