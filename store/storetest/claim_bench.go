package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// BenchmarkClaimWhilePublishing is the claim path of `herald bench`: a
// fresh store (tables start empty, never analyzed) that grows while it is
// claimed. Every iteration (untimed) completes what the last claim took and
// publishes 100 events spread over subs subscriptions, then claims Limit
// 100 (timed). The table of finished deliveries grows by 100 rows per
// iteration, so a claim whose cost follows the table (a sequential scan, a
// plan made while the table was empty) slows down as the run goes on, and a
// claim of O(subscriptions + Limit) does not.
//
// deliveries/s is claimed deliveries per second of claim time.
func BenchmarkClaimWhilePublishing(b *testing.B, newStore func(b *testing.B) store.Store) {
	const limit = 100
	for _, subs := range []int{1, 10} {
		b.Run(fmt.Sprintf("subs=%d/limit=%d", subs, limit), func(b *testing.B) {
			ctx := b.Context()
			s := newStore(b)
			ids := make([]string, subs)
			for i := range ids {
				sub := newSubscription(func(s *herald.Subscription) {
					s.Ordering, s.KeyIntervalMS, s.RateLimit, s.MaxInFlight = herald.OrderingNone, 0, nil, 0
					s.Filter, s.EventTypes = nil, nil
				})
				if _, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: newSecret(), Now: now}); err != nil {
					b.Fatal(err)
				}
				ids[i] = sub.ID
			}
			at := now
			n := 0
			publish := func() {
				events := make([]store.EventInsert, limit)
				for i := range events {
					n++
					events[i] = store.EventInsert{
						Event:      &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "bench", Data: json.RawMessage(`{"n":1}`), CreatedAt: at},
						Deliveries: []store.DeliveryInsert{{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: ids[n%subs], NextAttemptAt: at}},
					}
				}
				if _, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: events, Now: at}); err != nil {
					b.Fatal(err)
				}
			}
			var claimed []*store.ClaimedDelivery
			total, rotate := 0, ""
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
				publish()
				b.StartTimer()
				var err error
				claimed, err = s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
					Tier: 0, Limit: limit, Now: at, LeaseOwner: ownerA, LeaseUntil: at.Add(time.Minute), RotateAfter: rotate,
				})
				if err != nil {
					b.Fatal(err)
				}
				if len(claimed) != limit {
					b.Fatalf("claimed %d, want %d", len(claimed), limit)
				}
				rotate = claimed[len(claimed)-1].Delivery.SubscriptionID
				total += len(claimed)
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "deliveries/s")
			b.ReportMetric(float64(n), "rows")
		})
	}
}
