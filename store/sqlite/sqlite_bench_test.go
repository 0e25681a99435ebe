package sqlite_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/sqlite"
)

var benchNow = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

func benchStore(b *testing.B, sync string) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(b.Context(), sqlite.Config{Path: filepath.Join(b.TempDir(), "herald.db"), Synchronous: sync})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	require.NoError(b, s.Migrate(b.Context()))
	return s
}

func benchSubs(b *testing.B, s *sqlite.Store, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		sub, err := s.SubscriptionCreate(b.Context(), &store.SubscriptionCreateParams{
			Subscription: &herald.Subscription{
				ID: herald.NewID(herald.PrefixSubscription), URL: "https://example.com/hook", Method: "POST",
				Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled, CreatedAt: benchNow, UpdatedAt: benchNow,
			},
			Secret: "whsec_bench", Now: benchNow,
		})
		require.NoError(b, err)
		ids[i] = sub.ID
	}
	return ids
}

// payload is a 1 KiB JSON document.
var payload = func() json.RawMessage {
	return json.RawMessage(`{"pad":"` + string(bytes.Repeat([]byte("x"), 1024-10)) + `"}`)
}()

func benchEvents(n int, subIDs []string, due time.Time) []store.EventInsert {
	events := make([]store.EventInsert, n)
	for i := range events {
		events[i] = store.EventInsert{
			Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "bundle.indexed", Data: payload, CreatedAt: benchNow},
			Deliveries: []store.DeliveryInsert{{
				ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: subIDs[i%len(subIDs)], NextAttemptAt: due,
			}},
		}
	}
	return events
}

// BenchmarkEventInsertMany measures group-committed ingest: one call per
// batch, each event 1 KiB with one delivery. events/s is the figure to read.
func BenchmarkEventInsertMany(b *testing.B) {
	for _, sync := range []string{"full", "normal"} {
		for _, batch := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("sync=%s/batch=%d", sync, batch), func(b *testing.B) {
				s := benchStore(b, sync)
				subs := benchSubs(b, s, 10)
				total := 0
				for b.Loop() {
					b.StopTimer()
					events := benchEvents(batch, subs, benchNow)
					b.StartTimer()
					_, err := s.EventInsertMany(b.Context(), &store.EventInsertManyParams{Events: events, Now: benchNow})
					if err != nil {
						b.Fatal(err)
					}
					total += batch
				}
				b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// BenchmarkDeliveryClaim claims Limit 100 from a 100,000-delivery due
// backlog in tier 0 spread over 1, 100 or 1,000 subscriptions. Each claimed
// batch is released outside the timer, so the backlog stays at 100k.
func BenchmarkDeliveryClaim(b *testing.B) {
	const backlog, limit = 100_000, 100
	for _, nsubs := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("backlog=100k/subs=%d/limit=%d", nsubs, limit), func(b *testing.B) {
			s := benchStore(b, "normal") // setup speed only; claims are one tx either way
			subs := benchSubs(b, s, nsubs)
			for i := 0; i < backlog; i += 1000 {
				_, err := s.EventInsertMany(b.Context(), &store.EventInsertManyParams{
					Events: benchEvents(1000, subs, benchNow.Add(-time.Hour)), Now: benchNow,
				})
				require.NoError(b, err)
			}
			at := benchNow
			for b.Loop() {
				claimed, err := s.DeliveryClaim(b.Context(), &store.DeliveryClaimParams{
					Tier: 0, Limit: limit, Now: at, LeaseOwner: "bench", LeaseUntil: at.Add(time.Minute),
				})
				if err != nil {
					b.Fatal(err)
				}
				if len(claimed) != limit {
					b.Fatalf("claimed %d, want %d", len(claimed), limit)
				}
				b.StopTimer()
				ids := make([]string, len(claimed))
				for i, c := range claimed {
					ids[i] = c.Delivery.ID
				}
				// Released work is due at a later Now, so it goes to the back
				// of the queue like fresh work would.
				at = at.Add(time.Millisecond)
				if _, err := s.DeliveryRelease(b.Context(), &store.DeliveryReleaseParams{IDs: ids, LeaseOwner: "bench", Now: at}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*limit)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

// benchSentHeaders and benchReceivedHeaders are what a webhook attempt
// records (migration 018): the ten headers herald sends and one extra
// subscription header, and a small receiver's answer (about 500 bytes of
// JSON a row in all).
var (
	benchSentHeaders = map[string]string{
		"content-length": "137", "content-type": "application/json", "herald-attempt": "1",
		"herald-event-type": "order.created", "herald-subscription-id": "sub_01m8ef3hze7h6vzbanentv8yzw",
		"host": "hooks.example.com", "user-agent": "herald-webhooks/1", "webhook-id": "dlv_01m8ef3m49a4hmayj9dz08c4r2",
		"webhook-signature": "v1,***", "webhook-timestamp": "1795781939", "x-tenant": "acme",
	}
	benchReceivedHeaders = map[string]string{
		"content-length": "11", "content-type": "application/json", "date": "Fri, 27 Nov 2026 12:18:59 GMT",
	}
)

// BenchmarkDeliveryLifecycle is the store's share of one delivery on the
// direct path (issue 13): events inserted with their delivery leased
// (direct dispatch) in groups of 32, as a busy ingest commits them, then
// completed as delivered in one completion transaction, attempt included.
// ns/delivery is the figure to read; sync=normal leaves out the fsync so
// the B-tree work is what varies.
func BenchmarkDeliveryLifecycle(b *testing.B) {
	const group = 32
	for _, nsubs := range []int{1, 10} {
		b.Run(fmt.Sprintf("subs=%d/group=%d", nsubs, group), func(b *testing.B) {
			s := benchStore(b, "normal")
			subs := benchSubs(b, s, nsubs)
			total := 0
			for b.Loop() {
				b.StopTimer()
				events := benchEvents(group, subs, benchNow)
				outcomes := make([]store.DeliveryOutcome, group)
				health := make([]store.HealthAttempt, group)
				for i := range events {
					d := &events[i].Deliveries[0]
					d.LeaseOwner, d.LeaseUntil = "bench", benchNow.Add(time.Minute)
					outcomes[i] = store.DeliveryOutcome{
						DeliveryID: d.ID, LeaseOwner: "bench", State: herald.DeliveryDelivered,
						Attempt: herald.Attempt{N: 1, At: benchNow, DurationMS: 2, Status: 200,
							RequestHeaders: benchSentHeaders, ResponseHeaders: benchReceivedHeaders},
					}
					health[i] = store.HealthAttempt{SubscriptionID: d.SubscriptionID, At: benchNow, OK: true}
				}
				b.StartTimer()
				if _, err := s.EventInsertMany(b.Context(), &store.EventInsertManyParams{Events: events, Now: benchNow}); err != nil {
					b.Fatal(err)
				}
				// The subscriptions' health rides along, as the engine sends it.
				res, err := s.DeliveryCompleteMany(b.Context(), &store.DeliveryCompleteManyParams{
					Outcomes: outcomes, Health: store.HealthUpdates(health), Now: benchNow,
				})
				if err != nil {
					b.Fatal(err)
				}
				if res.Applied != group {
					b.Fatalf("applied %d of %d", res.Applied, group)
				}
				total += group
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/delivery")
		})
	}
}

// BenchmarkDeliveryDrain is the store's share of delivering a backlog (the
// --drain phase of herald bench): claim 64 due deliveries from a 50,000
// backlog, then complete them as delivered in one completion transaction.
// Each round's deliveries are replaced outside the timer, so the backlog
// stays at 50k. ns/delivery is the figure to read; it includes the commits,
// whose cost grows with the writer's page cache (writerCacheKiB).
func BenchmarkDeliveryDrain(b *testing.B) {
	const backlog, limit = 50_000, 64
	for _, nsubs := range []int{1, 10} {
		b.Run(fmt.Sprintf("backlog=50k/subs=%d/limit=%d", nsubs, limit), func(b *testing.B) {
			s := benchStore(b, "normal")
			subs := benchSubs(b, s, nsubs)
			for i := 0; i < backlog; i += 1000 {
				_, err := s.EventInsertMany(b.Context(), &store.EventInsertManyParams{
					Events: benchEvents(1000, subs, benchNow.Add(-time.Hour)), Now: benchNow,
				})
				require.NoError(b, err)
			}
			at, total := benchNow, 0
			for b.Loop() {
				claimed, err := s.DeliveryClaim(b.Context(), &store.DeliveryClaimParams{
					Tier: 0, Limit: limit, Now: at, LeaseOwner: "bench", LeaseUntil: at.Add(time.Minute),
				})
				if err != nil {
					b.Fatal(err)
				}
				if len(claimed) != limit {
					b.Fatalf("claimed %d, want %d", len(claimed), limit)
				}
				outcomes := make([]store.DeliveryOutcome, len(claimed))
				health := make([]store.HealthAttempt, len(claimed))
				for i, c := range claimed {
					outcomes[i] = store.DeliveryOutcome{
						DeliveryID: c.Delivery.ID, LeaseOwner: "bench", State: herald.DeliveryDelivered,
						Attempt: herald.Attempt{N: c.Attempt, At: at, DurationMS: 2, Status: 200,
							RequestHeaders: benchSentHeaders, ResponseHeaders: benchReceivedHeaders},
					}
					health[i] = store.HealthAttempt{SubscriptionID: c.Delivery.SubscriptionID, At: at, OK: true}
				}
				// The subscriptions' health rides along, as the engine sends it.
				res, err := s.DeliveryCompleteMany(b.Context(), &store.DeliveryCompleteManyParams{
					Outcomes: outcomes, Health: store.HealthUpdates(health), Now: at,
				})
				if err != nil {
					b.Fatal(err)
				}
				if res.Applied != limit {
					b.Fatalf("applied %d of %d", res.Applied, limit)
				}
				total += limit
				b.StopTimer()
				at = at.Add(time.Millisecond)
				if _, err := s.EventInsertMany(b.Context(), &store.EventInsertManyParams{
					Events: benchEvents(limit, subs, at), Now: at,
				}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/delivery")
		})
	}
}
