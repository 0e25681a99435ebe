package ingest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/sqlite"
)

// benchPayload is 1 KiB of event data.
var benchPayload = json.RawMessage(`{"pad":"` + strings.Repeat("x", 1024-10) + `"}`)

// benchIngester returns a started Ingester on s with one matching
// subscription (fan-out 1).
func benchIngester(b *testing.B, s store.Store, committers int) *Ingester {
	b.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err := s.SubscriptionCreate(b.Context(), &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), URL: "https://example.com/hook", Method: "POST",
			EventTypes: []string{"bench.*"}, Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled,
			CreatedAt: now, UpdatedAt: now,
		},
		Secret: "whsec_bench", Now: now,
	})
	require.NoError(b, err)
	ing := New(Config{Store: s, Committers: committers})
	ing.Start()
	b.Cleanup(ing.Close)
	return ing
}

func benchSQLite(b *testing.B, sync string) store.Store {
	b.Helper()
	s, err := sqlite.Open(b.Context(), sqlite.Config{Path: filepath.Join(b.TempDir(), "herald.db"), Synchronous: sync})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	require.NoError(b, s.Migrate(b.Context()))
	return s
}

// publishConcurrently runs PublishOne from conc goroutines until b.Loop
// ends, like conc HTTP clients each waiting for its own 202.
func publishConcurrently(b *testing.B, ing *Ingester, conc int) {
	var n atomic.Int64
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		const perRound = 2000
		var next atomic.Int64
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= perRound {
					_, err := ing.PublishOne(b.Context(), &herald.Event{Type: "bench.event", Data: benchPayload})
					if err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkPublishOne measures group commit without HTTP: 64 concurrent
// single publishes, each answered after its batch committed, 1 KiB events,
// fan-out 1.
//
//	go test -run '^$' -bench PublishOne -benchtime 5x ./ingest/
func BenchmarkPublishOne(b *testing.B) {
	for _, sync := range []string{"full", "normal"} {
		b.Run("sqlite/sync="+sync+"/conc=64", func(b *testing.B) {
			publishConcurrently(b, benchIngester(b, benchSQLite(b, sync), 1), 64)
		})
	}
	b.Run("postgres/committers=4/conc=64", func(b *testing.B) {
		publishConcurrently(b, benchIngester(b, testdb.Postgres(b), 4), 64)
	})
}

// BenchmarkPublishMany measures the batch API's path: one transaction per
// call of 1,000 events.
//
//	go test -run '^$' -bench PublishMany -benchtime 5x ./ingest/
func BenchmarkPublishMany(b *testing.B) {
	run := func(b *testing.B, s store.Store) {
		ing := benchIngester(b, s, 1)
		const size = 1000
		total := 0
		for b.Loop() {
			b.StopTimer()
			events := make([]*herald.Event, size)
			for i := range events {
				events[i] = &herald.Event{Type: "bench.event", Data: benchPayload}
			}
			b.StartTimer()
			res, err := ing.PublishMany(b.Context(), events)
			if err != nil {
				b.Fatal(err)
			}
			if len(res) != size || res[0].DeliveryCount != 1 {
				b.Fatalf("results %d, first %+v", len(res), res[0])
			}
			total += size
		}
		b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
	}
	for _, sync := range []string{"full", "normal"} {
		b.Run(fmt.Sprintf("sqlite/sync=%s/batch=1000", sync), func(b *testing.B) { run(b, benchSQLite(b, sync)) })
	}
	b.Run("postgres/batch=1000", func(b *testing.B) { run(b, testdb.Postgres(b)) })
}
