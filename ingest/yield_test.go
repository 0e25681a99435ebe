package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

func batchOf(n int) []*herald.Event {
	evs := make([]*herald.Event, n)
	for i := range evs {
		evs[i] = event("a.b", `{}`)
	}
	return evs
}

// While single publishes are recent (Config.BatchYield), batch publishes
// commit one at a time: three batches queued during a held commit are three
// commits, not one group. With the yield off they share the next group.
// A batch waiting for its turn gives up with its context and stores
// nothing.
func TestBatchesYieldToSingles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		yield time.Duration
		queue int   // batch requests queued while the first commit is held
		sizes []int // the commits' sizes
	}{
		{"yield", time.Hour, 1, []int{1, 5, 5, 5}},
		{"off", -1, 3, []int{1, 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testdb.ForEach(t, func(t *testing.T, s store.Store) {
				createSub(t, s, nil, nil, herald.SubscriptionEnabled)
				g := &gatedStore{Store: s, hold: make(chan struct{}), holding: make(chan struct{})}
				hold := g.hold
				var once sync.Once
				release := func() { once.Do(func() { close(hold) }) }
				ing := setup(t, g, Config{BatchYield: tc.yield})
				// Registered after setup's Close, so it runs first: a
				// failed check does not leave Close waiting on the held
				// commit.
				t.Cleanup(release)

				single := make(chan error, 1)
				go func() {
					_, err := ing.PublishOne(context.Background(), event("a.b", `{}`))
					single <- err
				}()
				<-g.holding // the single's commit is held

				var wg sync.WaitGroup
				errs := make([]error, 3)
				for i := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, errs[i] = ing.PublishMany(context.Background(), batchOf(5))
					}()
				}
				require.Eventually(t, func() bool { return len(ing.reqs) == tc.queue }, 10*time.Second, time.Millisecond)
				if tc.yield > 0 {
					// The turn is taken: a batch whose caller gives up
					// while it waits is not stored.
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					res, err := ing.PublishMany(ctx, batchOf(2))
					cancel()
					require.ErrorIs(t, err, context.DeadlineExceeded)
					require.Nil(t, res)
					require.Equal(t, tc.queue, len(ing.reqs))
				}
				release()
				require.NoError(t, <-single)
				wg.Wait()
				for _, err := range errs {
					require.NoError(t, err)
				}
				g.mu.Lock()
				defer g.mu.Unlock()
				require.Equal(t, tc.sizes, g.sizes)
			})
		})
	}
}
