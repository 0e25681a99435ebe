package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// BenchmarkOrderingClaim compares the claim of a "latest" subscription over
// 1,000 hot keys with the same load on an "ordering: none" subscription.
// The backlog starts at 10 pending versions per key; every iteration
// (untimed) completes what the last claim took and publishes 100 newer
// versions on random keys, then claims Limit 100 (timed). For latest that
// claim also supersedes the older pending versions of the keys it takes.
// deliveries/s is claimed deliveries per second of claim time.
//
// ordering=mixed is one latest subscription beside three unordered ones,
// every event delivered to all four: the claim water-fills across ordered
// and unordered subscriptions (the fairness rule in store/claim.go).
func BenchmarkOrderingClaim(b *testing.B, newStore func(b *testing.B) store.Store) {
	const keys, perKey, limit = 1000, 10, 100
	mixes := map[string][]herald.Ordering{
		"none":   {herald.OrderingNone},
		"latest": {herald.OrderingLatest},
		"mixed":  {herald.OrderingLatest, herald.OrderingNone, herald.OrderingNone, herald.OrderingNone},
	}
	for _, name := range []string{"none", "latest", "mixed"} {
		b.Run(fmt.Sprintf("ordering=%s/keys=%d/limit=%d", name, keys, limit), func(b *testing.B) {
			ctx := b.Context()
			s := newStore(b)
			var subs []*herald.Subscription
			for _, ordering := range mixes[name] {
				sub := newSubscription(func(s *herald.Subscription) {
					s.Ordering, s.KeyIntervalMS, s.RateLimit, s.MaxInFlight = ordering, 0, nil, 0
					s.Filter, s.EventTypes = nil, nil
				})
				if _, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: newSecret(), Now: now}); err != nil {
					b.Fatal(err)
				}
				subs = append(subs, sub)
			}
			rnd := rand.New(rand.NewPCG(1, 2))
			version := int64(0)
			at := now
			publish := func(n int, key func(i int) string) {
				events := make([]store.EventInsert, n)
				for i := range events {
					version++
					v := version
					events[i] = store.EventInsert{
						Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "doc.updated", Key: key(i),
							Version: &v, Data: json.RawMessage(`{}`), CreatedAt: at},
					}
					for _, sub := range subs {
						events[i].Deliveries = append(events[i].Deliveries,
							store.DeliveryInsert{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: sub.ID, NextAttemptAt: at})
					}
				}
				if _, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: events, Now: at}); err != nil {
					b.Fatal(err)
				}
			}
			for range perKey {
				publish(keys, func(i int) string { return fmt.Sprintf("key-%04d", i) })
			}
			var claimed []*store.ClaimedDelivery
			total := 0
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				if len(claimed) > 0 {
					outcomes := make([]store.DeliveryOutcome, len(claimed))
					for i, c := range claimed {
						outcomes[i] = delivered(c, ownerA, at)
					}
					if _, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: at}); err != nil {
						b.Fatal(err)
					}
				}
				at = at.Add(time.Millisecond)
				publish(limit, func(int) string { return fmt.Sprintf("key-%04d", rnd.IntN(keys)) })
				b.StartTimer()
				var err error
				claimed, err = s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
					Tier: 0, Limit: limit, Now: at, LeaseOwner: ownerA, LeaseUntil: at.Add(time.Minute),
				})
				if err != nil {
					b.Fatal(err)
				}
				if len(claimed) == 0 {
					b.Fatal("claimed nothing")
				}
				total += len(claimed)
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "deliveries/s")
			b.ReportMetric(float64(total)/float64(b.N), "claimed/op")
		})
	}
}
