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

// deletingStore deletes a subscription at the start of the next
// EventInsertMany: after the fan-out cache was refreshed for the commit,
// before the insert — a delete landing during a group commit.
type deletingStore struct {
	store.Store
	mu     sync.Mutex
	victim string
}

func (d *deletingStore) EventInsertMany(ctx context.Context, p *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	d.mu.Lock()
	victim := d.victim
	d.victim = ""
	d.mu.Unlock()
	if victim != "" {
		if err := d.Store.SubscriptionDelete(ctx, &store.SubscriptionDeleteParams{ID: victim, Now: p.Now}); err != nil {
			return nil, err
		}
		if p.Versions != nil {
			// The delete lands after the insert checked the versions (it
			// commits between the statement's snapshot and its lock on the
			// subscription): the guard passes and the store drops the
			// delivery itself.
			v, err := d.Store.SubscriptionsVersion(ctx)
			if err != nil {
				return nil, err
			}
			q := *p
			q.Versions = &v
			p = &q
		}
	}
	return d.Store.EventInsertMany(ctx, p)
}

// A subscription deleted during a group commit gets no delivery, and the
// one leased for it (direct dispatch) is not sent (issue 10, item 4).
func TestDeletedDuringCommitNotDispatched(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		keep := createSub(t, s, []string{"gone.*"}, nil, herald.SubscriptionEnabled)
		victim := createSub(t, s, []string{"gone.*"}, nil, herald.SubscriptionEnabled)
		ds := &deletingStore{Store: s}
		d := &fakeDispatcher{free: 100}
		ing := setup(t, ds, Config{Dispatcher: d})
		// Load the cache with both subscriptions, then delete one during
		// the next commit.
		_, err := ing.PublishOne(ctx, event("gone.warmup", `{}`))
		require.NoError(t, err)
		_, _, warm := d.snapshot()
		ds.mu.Lock()
		ds.victim = victim.ID
		ds.mu.Unlock()

		res, err := ing.PublishOne(ctx, event("gone.one", `{}`))
		require.NoError(t, err)
		require.Equal(t, 1, res.DeliveryCount)
		require.Len(t, res.Dropped, 1)

		reserved, cancelled, started := d.snapshot()
		require.Equal(t, 4, reserved, "both subscriptions qualified in both commits")
		require.Equal(t, 1, cancelled, "the dropped delivery's slot is given back")
		started = started[len(warm):]
		require.Len(t, started, 1)
		require.Equal(t, keep.ID, started[0].Subscription.ID)

		got, err := s.EventGet(ctx, &store.EventGetParams{ID: res.ID})
		require.NoError(t, err)
		require.Len(t, got.Deliveries, 1)
		require.Equal(t, keep.ID, got.Deliveries[0].SubscriptionID)
		st, err := s.StatsGet(ctx, &store.StatsGetParams{Tiers: 1, Now: time.Now()})
		require.NoError(t, err)
		require.Zero(t, st.Tiers[0].Pending+st.Tiers[0].Held, "nothing of the deleted subscription waits")
	})
}
