package ingest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/filter"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// loadStore wraps a real store: it counts the fan-out cache's reads, can
// hold the first SubscriptionListAll (after it read, so it returns a stale
// snapshot) until released, and can hold every SubscriptionListAll until a
// number of SubscriptionsVersion reads have returned.
type loadStore struct {
	store.Store
	listAll, pauseList, versions atomic.Int64

	mu sync.Mutex
	// holdFirst, when set, holds the next SubscriptionListAll once it has
	// read: holding is closed then, and it returns when hold is closed.
	holdFirst     bool
	hold, holding chan struct{}
	// gate, when set, holds every SubscriptionListAll until versions
	// reaches gateAt.
	gate   chan struct{}
	gateAt int64
}

func (l *loadStore) SubscriptionsVersion(ctx context.Context) (store.SubscriptionsVersions, error) {
	v, err := l.Store.SubscriptionsVersion(ctx)
	n := l.versions.Add(1)
	l.mu.Lock()
	if l.gate != nil && n == l.gateAt {
		close(l.gate)
	}
	l.mu.Unlock()
	return v, err
}

func (l *loadStore) SubscriptionListAll(ctx context.Context) (*store.SubscriptionListAllResult, error) {
	l.listAll.Add(1)
	l.mu.Lock()
	holdFirst, hold, holding, gate := l.holdFirst, l.hold, l.holding, l.gate
	l.holdFirst = false
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
	res, err := l.Store.SubscriptionListAll(ctx)
	if holdFirst {
		close(holding)
		<-hold
	}
	return res, err
}

func (l *loadStore) SubscriptionPauseList(ctx context.Context) (*store.SubscriptionPauseListResult, error) {
	l.pauseList.Add(1)
	return l.Store.SubscriptionPauseList(ctx)
}

func matchedIDs(f *Fanout, ev *herald.Event) []string {
	var ids []string
	for _, sub := range f.Match(ev) {
		ids = append(ids, sub.ID)
	}
	return ids
}

// A slow reload that read an older snapshot finishes after a newer one was
// installed: the cache keeps the newer one (issue 10, item 7).
func TestFanoutSlowReloadNeverGoesBack(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		first := createSub(t, s, []string{"order.*"}, nil, herald.SubscriptionEnabled)
		ls := &loadStore{Store: s, holdFirst: true, hold: make(chan struct{}), holding: make(chan struct{})}
		f := NewFanout(ls, nil)

		slow := make(chan error, 1)
		go func() { slow <- f.Refresh(ctx) }()
		<-ls.holding // it read a snapshot with first only

		second := createSub(t, s, []string{"order.*"}, nil, herald.SubscriptionEnabled)
		require.NoError(t, f.Refresh(ctx), "a newer version does not wait for the slow load")
		ev := event("order.created", `{}`)
		require.ElementsMatch(t, []string{first.ID, second.ID}, matchedIDs(f, ev))

		close(ls.hold)
		require.NoError(t, <-slow)
		require.ElementsMatch(t, []string{first.ID, second.ID}, matchedIDs(f, ev), "the slow, older load is not installed")
		require.EqualValues(t, 2, ls.listAll.Load())

		// Nothing changed since: the next refresh reads nothing.
		require.NoError(t, f.Refresh(ctx))
		require.EqualValues(t, 2, ls.listAll.Load())
		require.ElementsMatch(t, []string{first.ID, second.ID}, matchedIDs(f, ev))
	})
}

// Refreshes that see the same new version at once (every committer after a
// subscription change) share one load (issue 10, item 7).
func TestFanoutConcurrentRefreshesLoadOnce(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		ls := &loadStore{Store: s}
		f := NewFanout(ls, nil)
		require.NoError(t, f.Refresh(ctx))
		require.EqualValues(t, 1, ls.listAll.Load())

		added := createSub(t, s, []string{"order.*"}, nil, herald.SubscriptionEnabled)
		const n = 8
		// The load is held until all n have read the new version, so
		// they all overlap it.
		ls.mu.Lock()
		ls.gate, ls.gateAt = make(chan struct{}), ls.versions.Load()+n
		ls.mu.Unlock()
		errs := make(chan error, n)
		for range n {
			go func() { errs <- f.Refresh(ctx) }()
		}
		for range n {
			require.NoError(t, <-errs)
		}
		require.EqualValues(t, 2, ls.listAll.Load(), "one load for all %d refreshes", n)
		require.Contains(t, matchedIDs(f, event("order.created", `{}`)), added.ID)
	})
}

// A reload recompiles only the filters that changed, and a pause reloads
// the pauses alone: no subscription is read or compiled again (issue 10,
// item 8).
func TestFanoutReloadCompilesOnlyChanged(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		cel := func(expr string) *herald.Filter { return &herald.Filter{CEL: expr} }
		small := createSub(t, s, nil, cel("data.size < 10"), herald.SubscriptionEnabled)
		big := createSub(t, s, nil, cel("data.size > 100"), herald.SubscriptionEnabled)
		mid := createSub(t, s, nil, cel("data.size == 50"), herald.SubscriptionEnabled)

		ls := &loadStore{Store: s}
		f := NewFanout(ls, nil)
		var compiled sync.Map // subscription filter CEL -> times compiled
		count := func(expr string) int {
			n, _ := compiled.Load(expr)
			c, _ := n.(int)
			return c
		}
		f.compile = func(fl *herald.Filter) (filter.Matcher, error) {
			compiled.Store(fl.CEL, count(fl.CEL)+1)
			return filter.Compile(fl)
		}
		require.NoError(t, f.Refresh(ctx))
		for _, expr := range []string{"data.size < 10", "data.size > 100", "data.size == 50"} {
			require.Equal(t, 1, count(expr), expr)
		}
		matchers := func() map[string]filter.Matcher {
			f.mu.RLock()
			defer f.mu.RUnlock()
			out := map[string]filter.Matcher{}
			for _, cs := range f.subs {
				out[cs.sub.ID] = cs.matcher
			}
			return out
		}
		before := matchers()

		// One filter edited, another subscription edited elsewhere.
		update := func(sub *herald.Subscription, mod func(*herald.Subscription)) {
			t.Helper()
			mod(sub)
			_, err := s.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: sub, Now: time.Now()})
			require.NoError(t, err)
		}
		update(mid, func(s *herald.Subscription) { s.Filter = cel("data.size >= 50") })
		update(small, func(s *herald.Subscription) { s.Description = "renamed" })
		require.NoError(t, f.Refresh(ctx))
		require.EqualValues(t, 2, ls.listAll.Load())
		require.Equal(t, 1, count("data.size >= 50"), "the edited filter is compiled")
		for _, expr := range []string{"data.size < 10", "data.size > 100", "data.size == 50"} {
			require.Equal(t, 1, count(expr), "%s is not compiled again", expr)
		}
		after := matchers()
		require.Same(t, before[small.ID], after[small.ID])
		require.Same(t, before[big.ID], after[big.ID])
		require.NotSame(t, before[mid.ID], after[mid.ID])
		require.ElementsMatch(t, []string{mid.ID, big.ID}, matchedIDs(f, event("x", `{"size": 200}`)))
		require.ElementsMatch(t, []string{small.ID}, matchedIDs(f, event("x", `{"size": 5}`)))

		// A pause (a 429 with Retry-After on some node) reloads the pauses
		// only.
		pauseSub(t, s, big.ID, time.Now().Add(time.Hour))
		require.NoError(t, f.Refresh(ctx))
		require.EqualValues(t, 2, ls.listAll.Load(), "a pause reads no subscription")
		require.EqualValues(t, 1, ls.pauseList.Load())
		require.Same(t, before[big.ID], matchers()[big.ID])
	})
}

// pauseSub pauses a subscription through a completion, as the engine does
// on a 429 with Retry-After.
func pauseSub(t *testing.T, s store.Store, id string, until time.Time) {
	t.Helper()
	_, err := s.DeliveryCompleteMany(context.Background(), &store.DeliveryCompleteManyParams{
		PauseSubscriptions: []store.SubscriptionPause{{ID: id, Until: until}},
		Now:                time.Now(),
	})
	require.NoError(t, err)
}

// A pause made by another node reaches this node's direct dispatch without
// moving the subscriptions version, so no node reloads its subscriptions
// (issue 10, item 8).
func TestDirectDispatchSeesOtherNodesPause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (this, other store.Store)
	}{
		{"sqlite", func(t *testing.T) (store.Store, store.Store) { s := testdb.SQLite(t); return s, s }},
		{"postgres", func(t *testing.T) (store.Store, store.Store) {
			schema := testdb.PostgresSchema(t)
			return testdb.OpenPostgres(t, schema), testdb.OpenPostgres(t, schema)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			this, other := tc.open(t)
			sub := createSub(t, other, nil, nil, herald.SubscriptionEnabled)
			ls := &loadStore{Store: this}
			now := time.Now().UTC().Truncate(time.Millisecond)
			var mu sync.Mutex
			clock := now
			d := &fakeDispatcher{free: 10}
			ing := setup(t, ls, Config{Dispatcher: d, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})

			_, err := ing.PublishOne(ctx, event("pause.test", `{}`))
			require.NoError(t, err)
			reserved, _, _ := d.snapshot()
			require.Equal(t, 1, reserved, "not paused: dispatched directly")
			require.EqualValues(t, 1, ls.listAll.Load())

			before, err := other.SubscriptionsVersion(ctx)
			require.NoError(t, err)
			until := now.Add(time.Minute)
			pauseSub(t, other, sub.ID, until)
			after, err := other.SubscriptionsVersion(ctx)
			require.NoError(t, err)
			require.Equal(t, before.Subscriptions, after.Subscriptions, "a pause is no subscription change")

			_, err = ing.PublishOne(ctx, event("pause.test", `{}`))
			require.NoError(t, err)
			// Slots net of those given back: the first try matched on the
			// cache from before the pause, and its insert found the pauses
			// version moved (store.ErrSubscriptionsMoved).
			reserved, cancelled, _ := d.snapshot()
			require.Equal(t, 1, reserved-cancelled, "paused on the other node: no direct dispatch here")
			require.EqualValues(t, 1, ls.listAll.Load(), "the pause did not reload the subscriptions")
			require.EqualValues(t, 1, ls.pauseList.Load())

			mu.Lock()
			clock = until
			mu.Unlock()
			_, err = ing.PublishOne(ctx, event("pause.test", `{}`))
			require.NoError(t, err)
			reserved, cancelled, _ = d.snapshot()
			require.Equal(t, 2, reserved-cancelled, "the pause ended")
			require.EqualValues(t, 1, ls.listAll.Load())
		})
	}
}
