package ingest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// Single publishes are not gathered with batch calls and do not queue
// behind them: while a batch's commit is held, singles commit on their own
// lane, and a second batch waits for the first (issue 28).
func TestSinglePublishesSkipBatches(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		g := &gatedStore{Store: s}
		ing := setup(t, g, Config{})
		ctx := context.Background()
		_, err := ing.PublishOne(ctx, event("warm.up", `{}`)) // load the cache
		require.NoError(t, err)

		g.mu.Lock()
		g.sizes, g.hold, g.holding = nil, make(chan struct{}), make(chan struct{})
		release, holding := g.hold, g.holding
		g.mu.Unlock()
		batch := func(n int) []*herald.Event {
			evs := make([]*herald.Event, n)
			for k := range evs {
				evs[k] = event("bulk.item", fmt.Sprintf(`{"n":%d}`, k))
			}
			return evs
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := ing.PublishMany(ctx, batch(10))
			require.NoError(t, err)
		}()
		<-holding
		go func() {
			defer wg.Done()
			_, err := ing.PublishMany(ctx, batch(12))
			require.NoError(t, err)
		}()

		singles := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := ing.PublishOne(ctx, event("single.one", `{}`))
				singles <- err
			}()
		}
		deadline := time.After(10 * time.Second)
		var waited bool
		for n := 0; n < 3 && !waited; n++ {
			select {
			case err := <-singles:
				require.NoError(t, err)
			case <-deadline:
				waited = true
			}
		}
		close(release) // before failing: Close waits for the held commit
		wg.Wait()
		require.False(t, waited, "single publishes waited for the held batch")

		g.mu.Lock()
		sizes := append([]int(nil), g.sizes...)
		g.mu.Unlock()
		require.Equal(t, 10, sizes[0], "the held batch")
		require.Equal(t, 12, sizes[len(sizes)-1], "the second batch, alone, after the first")
		singlesCommitted := 0
		for _, n := range sizes[1 : len(sizes)-1] {
			require.Less(t, n, smallRequest, "a group of singles holds no batch")
			singlesCommitted += n
		}
		require.Equal(t, 3, singlesCommitted)
	})
}
