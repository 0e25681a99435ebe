package ingest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// gatedStore wraps a store: it can hold the first EventInsertMany until
// released, record batch sizes, and poison a batch so the real database
// rejects it (a duplicate delivery id violates the primary key).
type gatedStore struct {
	store.Store
	mu      sync.Mutex
	sizes   []int
	hold    chan struct{} // closed to release a held commit
	holding chan struct{} // closed when a commit is being held
	poison  bool
}

func (g *gatedStore) EventInsertMany(ctx context.Context, p *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	g.mu.Lock()
	g.sizes = append(g.sizes, len(p.Events))
	hold, holding, poison := g.hold, g.holding, g.poison
	g.hold = nil
	g.mu.Unlock()
	if hold != nil {
		close(holding)
		<-hold
	}
	if poison && len(p.Events) > 1 && len(p.Events[1].Deliveries) > 0 && len(p.Events[0].Deliveries) > 0 {
		p.Events[1].Deliveries[0].ID = p.Events[0].Deliveries[0].ID
	}
	return g.Store.EventInsertMany(ctx, p)
}

func createSub(t *testing.T, s store.Store, types []string, f *herald.Filter, state herald.SubscriptionState) *herald.Subscription {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub, err := s.SubscriptionCreate(context.Background(), &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), URL: "http://127.0.0.1:1/hook", Method: "POST",
			EventTypes: types, Filter: f, Headers: map[string]string{}, Ordering: herald.OrderingNone,
			TimeoutMS: 1000, State: state, Metadata: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now,
		},
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Now: now,
	})
	require.NoError(t, err)
	return sub
}

func setup(t *testing.T, s store.Store, cfg Config) *Ingester {
	t.Helper()
	cfg.Store = s
	ing := New(cfg)
	ing.Start()
	t.Cleanup(ing.Close)
	return ing
}

// subsOf returns the subscriptions of the stored event id's deliveries.
func subsOf(t *testing.T, s store.Store, id string) []string {
	t.Helper()
	got, err := s.EventGet(context.Background(), &store.EventGetParams{ID: id})
	require.NoError(t, err)
	var out []string
	for _, d := range got.Deliveries {
		out = append(out, d.SubscriptionID)
	}
	return out
}

func event(typ, data string) *herald.Event {
	return &herald.Event{Type: typ, Data: json.RawMessage(data)}
}

// Publishes that arrive while a commit runs are answered together by the
// next commit; nobody is answered before their batch committed.
func TestGroupCommitBatches(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		g := &gatedStore{Store: s, hold: make(chan struct{}), holding: make(chan struct{})}
		release := g.hold
		ing := setup(t, g, Config{})

		first := make(chan error, 1)
		go func() {
			_, err := ing.PublishOne(context.Background(), event("a.b", `{"n":0}`))
			first <- err
		}()
		<-g.holding // commit 1 is in progress and held

		const n = 40
		var wg sync.WaitGroup
		results := make([]store.EventInsertResult, n)
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = ing.PublishOne(context.Background(), event("a.b", `{}`))
			}()
		}
		require.Eventually(t, func() bool { return len(ing.reqs) == n }, 10*time.Second, time.Millisecond)
		select {
		case err := <-first:
			t.Fatalf("answered before its commit finished (err %v)", err)
		default:
		}
		close(release)
		require.NoError(t, <-first)
		wg.Wait()
		for i := 0; i < n; i++ {
			require.NoError(t, errs[i])
			require.Equal(t, 1, results[i].DeliveryCount)
			got, err := s.EventGet(context.Background(), &store.EventGetParams{ID: results[i].ID})
			require.NoError(t, err, "answered means stored")
			require.Len(t, got.Deliveries, 1)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		require.Equal(t, []int{1, n}, g.sizes, "the 40 waiting publishes share one commit")
	})
}

// A group commit the database refuses (a repeated delivery id violates
// the primary key; injected into every batch of more than one event) left
// nothing of the batch behind: it is committed again in parts, and every
// caller gets its own event, stored exactly once. (A store that is only
// unavailable fails every caller: TestGroupCommitUnavailableFailsWhole.)
func TestGroupCommitRefusedIsCommittedInParts(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		g := &gatedStore{Store: s, hold: make(chan struct{}), holding: make(chan struct{})}
		release := g.hold
		ing := setup(t, g, Config{})

		go func() { _, _ = ing.PublishOne(context.Background(), event("warm.up", `{}`)) }()
		<-g.holding
		g.mu.Lock()
		g.poison = true
		g.mu.Unlock()

		const n = 10
		var wg sync.WaitGroup
		errs := make([]error, n)
		evs := make([]*herald.Event, n)
		for i := 0; i < n; i++ {
			evs[i] = &herald.Event{ID: "poisoned-" + string(rune('a'+i)), Type: "a.b", Data: json.RawMessage(`{}`)}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = ing.PublishOne(context.Background(), evs[i])
			}()
		}
		require.Eventually(t, func() bool { return len(ing.reqs) == n }, 10*time.Second, time.Millisecond)
		close(release)
		wg.Wait()
		for i := 0; i < n; i++ {
			require.NoError(t, errs[i], "caller %d", i)
			got, err := s.EventGet(context.Background(), &store.EventGetParams{ID: evs[i].ID})
			require.NoError(t, err)
			require.Len(t, got.Deliveries, 1, "event %s", evs[i].ID)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		require.Equal(t, []int{1, n}, g.sizes[:2], "the refused commit held all %d", n)
		require.Greater(t, len(g.sizes), 2, "and was committed again in parts")
	})
}

// Fan-out: globs and filters select subscriptions; disabled ones get
// nothing; herald.* events go only to subscriptions that name them; a new
// subscription is seen by the next commit.
func TestFanout(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		all := createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		bundles := createSub(t, s, []string{"bundle.*"}, nil, herald.SubscriptionEnabled)
		big := createSub(t, s, []string{"bundle.*"}, &herald.Filter{CEL: "data.size > 10"}, herald.SubscriptionEnabled)
		createSub(t, s, nil, nil, herald.SubscriptionDisabled)
		alerts := createSub(t, s, []string{"herald.delivery.*"}, nil, herald.SubscriptionEnabled)
		ing := setup(t, s, Config{})

		res, err := ing.PublishMany(context.Background(), []*herald.Event{
			event("bundle.indexed", `{"size": 50}`),
			event("bundle.indexed", `{"size": 5}`),
			event("other.thing", `{"size": 50}`),
		})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{all.ID, bundles.ID, big.ID}, subsOf(t, s, res[0].ID))
		require.ElementsMatch(t, []string{all.ID, bundles.ID}, subsOf(t, s, res[1].ID))
		require.ElementsMatch(t, []string{all.ID}, subsOf(t, s, res[2].ID))

		// System events skip the blanket subscription.
		ins := ing.Fanout().Inserts([]*herald.Event{event(herald.EventTypeDeliveryDead, `{}`)}, time.Now(), 0)
		require.Len(t, ins[0].Deliveries, 1)
		require.Equal(t, alerts.ID, ins[0].Deliveries[0].SubscriptionID)

		late := createSub(t, s, []string{"other.*"}, nil, herald.SubscriptionEnabled)
		r, err := ing.PublishOne(context.Background(), event("other.thing", `{}`))
		require.NoError(t, err)
		require.ElementsMatch(t, []string{all.ID, late.ID}, subsOf(t, s, r.ID))
	})
}

// Idempotent ids: a repeat is a duplicate with the original count, also
// inside one batch.
func TestPublishDuplicates(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		createSub(t, s, nil, nil, herald.SubscriptionEnabled)
		ing := setup(t, s, Config{})
		r1, err := ing.PublishOne(context.Background(), &herald.Event{ID: "same", Type: "a.b", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.False(t, r1.Duplicate)
		require.Equal(t, 2, r1.DeliveryCount)
		res, err := ing.PublishMany(context.Background(), []*herald.Event{
			{ID: "same", Type: "a.b", Data: json.RawMessage(`{}`)},
			{ID: "new", Type: "a.b", Data: json.RawMessage(`{}`)},
			{ID: "new", Type: "a.b", Data: json.RawMessage(`{}`)},
		})
		require.NoError(t, err)
		require.True(t, res[0].Duplicate)
		require.Equal(t, 2, res[0].DeliveryCount)
		require.False(t, res[1].Duplicate)
		require.True(t, res[2].Duplicate)
		require.Equal(t, 2, res[2].DeliveryCount)
	})
}

// Close commits what was queued; later publishes are refused.
func TestCloseDrains(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	ing := New(Config{Store: s})
	ing.Start()
	r, err := ing.PublishOne(context.Background(), event("a.b", `{}`))
	require.NoError(t, err)
	ing.Close()
	_, err = s.EventGet(context.Background(), &store.EventGetParams{ID: r.ID})
	require.NoError(t, err)
	_, err = ing.PublishOne(context.Background(), event("a.b", `{}`))
	require.ErrorIs(t, err, ErrClosed)
}

// A group commit waits for more events only while publishers queue (the
// group before it held at least busyGroup events), while group commits
// follow each other closely (SteadyWait), or always with FlushInterval.
func TestGroupCommitWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   Config
		last  int
		close bool
		wait  time.Duration
	}{
		{"lone publish", Config{}, 1, false, 0},
		{"small group", Config{}, busyGroup - 1, false, 0},
		{"publishers queue", Config{}, busyGroup, false, DefaultBusyWait},
		{"custom busy wait", Config{BusyWait: 5 * time.Millisecond}, 100, false, 5 * time.Millisecond},
		{"busy wait off", Config{BusyWait: -1}, 100, false, 0},
		{"flush interval wins", Config{FlushInterval: 10 * time.Millisecond}, 0, true, 10 * time.Millisecond},
		{"steady flow of small groups", Config{}, 1, true, DefaultSteadyWait},
		{"busy wait before steady wait", Config{}, busyGroup, true, DefaultBusyWait},
		{"custom steady wait", Config{SteadyWait: 3 * time.Millisecond}, 1, true, 3 * time.Millisecond},
		{"steady wait off", Config{SteadyWait: -1}, 1, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Store = testdb.SQLite(t)
			require.Equal(t, tc.wait, New(tc.cfg).wait(tc.last, tc.close))
		})
	}
}
