package ingest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// churnStore creates a subscription before each guarded insert it passes
// on, so every guarded insert finds the versions moved.
type churnStore struct {
	*loadStore
	t                *testing.T
	guarded, created atomic.Int64
	churn            atomic.Bool
}

func (c *churnStore) EventInsertMany(ctx context.Context, params *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	if params.Versions != nil {
		c.guarded.Add(1)
		if c.churn.Load() {
			createSub(c.t, c.loadStore.Store, nil, nil, herald.SubscriptionEnabled)
			c.created.Add(1)
		}
	}
	return c.loadStore.EventInsertMany(ctx, params)
}

// A commit on a current cache reads no version of its own: the insert
// checks the cache's (issue 26). A change made behind the cache's back is
// still matched by the next publish, which reloads once.
func TestCommitChecksVersionsInTheInsert(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		first := createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		ls := &loadStore{Store: s}
		ing := setup(t, ls, Config{})

		r, err := ing.PublishOne(context.Background(), event("a.b", `{}`))
		require.NoError(t, err)
		require.Equal(t, []string{first.ID}, subsOf(t, s, r.ID))
		versions, loads := ls.versions.Load(), ls.listAll.Load()
		for range 5 {
			_, err := ing.PublishOne(context.Background(), event("a.b", `{}`))
			require.NoError(t, err)
		}
		require.Equal(t, versions, ls.versions.Load(), "commits on a current cache read no version")
		require.Equal(t, loads, ls.listAll.Load())

		late := createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		r, err = ing.PublishOne(context.Background(), event("a.b", `{}`))
		require.NoError(t, err)
		require.ElementsMatch(t, []string{first.ID, late.ID}, subsOf(t, s, r.ID), "a change committed before the publish is matched")
		require.Equal(t, loads+1, ls.listAll.Load(), "one reload")
	})
}

// Subscriptions changing before every guarded insert cannot starve a
// publish: after guardedTries misses the versions are read first and the
// insert is not checked. Every subscription created before it is matched.
func TestCommitUnderChurnFallsBackToReadingVersions(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		cs := &churnStore{loadStore: &loadStore{Store: s}, t: t}
		ing := setup(t, cs, Config{})
		_, err := ing.PublishOne(context.Background(), event("a.b", `{}`)) // load the cache
		require.NoError(t, err)

		cs.churn.Store(true)
		guarded := cs.guarded.Load()
		r, err := ing.PublishOne(context.Background(), event("a.b", `{}`))
		require.NoError(t, err)
		require.Equal(t, int64(guardedTries), cs.guarded.Load()-guarded, "guarded tries")
		require.Len(t, subsOf(t, s, r.ID), 1+int(cs.created.Load()), "every subscription created before the unchecked insert")
	})
}
