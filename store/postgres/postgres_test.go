package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
)

// t0 is the tests' clock: the store never reads time itself.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newSub(id string) *herald.Subscription {
	return &herald.Subscription{
		ID: id, URL: "https://example.com/" + id, Method: "POST",
		Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled,
		CreatedAt: t0, UpdatedAt: t0,
	}
}

func createSub(ctx context.Context, t *testing.T, s store.Store, id string) *herald.Subscription {
	t.Helper()
	sub, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{
		Subscription: newSub(id), Secret: "whsec_" + id, Now: t0,
	})
	require.NoError(t, err)
	return sub
}

// insertEvents stores n events, each with one delivery per subscription,
// due at due.
func insertEvents(ctx context.Context, t testing.TB, s store.Store, prefix string, n int, due time.Time, subs ...string) []string {
	t.Helper()
	var ins []store.EventInsert
	var dlv []string
	for i := range n {
		ev := &herald.Event{ID: fmt.Sprintf("%s-evt-%06d", prefix, i), Type: "t", Data: json.RawMessage(`{"i":1}`), CreatedAt: t0}
		e := store.EventInsert{Event: ev}
		for _, sub := range subs {
			id := fmt.Sprintf("%s-dlv-%s-%06d", prefix, sub, i)
			e.Deliveries = append(e.Deliveries, store.DeliveryInsert{ID: id, SubscriptionID: sub, NextAttemptAt: due})
			dlv = append(dlv, id)
		}
		ins = append(ins, e)
	}
	for len(ins) > 0 {
		k := min(len(ins), 1000)
		_, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: ins[:k], Now: t0})
		require.NoError(t, err)
		ins = ins[k:]
	}
	return dlv
}

func TestSubscriptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.Postgres(t)

	v0, err := s.SubscriptionsVersion(ctx)
	require.NoError(t, err)

	in := newSub("sub_a")
	in.EventTypes = []string{"bundle.*"}
	in.Filter = &herald.Filter{ESQuery: json.RawMessage(`{"term": {"a": 1}}`)}
	in.Headers = map[string]string{"x-tenant": "a"}
	in.RateLimit = &herald.RateLimit{Max: 10, PerSeconds: 1}
	in.Metadata = json.RawMessage(`{"b": 2,  "a": 1}`)
	in.CreatedAt = t0.Add(123456 * time.Nanosecond) // truncated to ms on write
	in.UpdatedAt = in.CreatedAt
	got, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: in, Secret: "whsec_1", Now: t0})
	require.NoError(t, err)
	require.Equal(t, t0, got.CreatedAt)
	require.Equal(t, in.Filter, got.Filter)
	require.Equal(t, in.Headers, got.Headers)
	require.Equal(t, in.RateLimit, got.RateLimit)
	require.Equal(t, string(in.Metadata), string(got.Metadata), "metadata bytes kept verbatim")

	_, err = s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: newSub("sub_a"), Secret: "x", Now: t0})
	require.ErrorIs(t, err, herald.ErrConflict)

	got2, err := s.SubscriptionGet(ctx, "sub_a")
	require.NoError(t, err)
	require.Equal(t, got, got2)

	createSub(ctx, t, s, "sub_b")
	createSub(ctx, t, s, "sub_c")
	page, err := s.SubscriptionList(ctx, &store.SubscriptionListParams{Limit: 2})
	require.NoError(t, err)
	require.True(t, page.More)
	require.Len(t, page.Subscriptions, 2)
	page, err = s.SubscriptionList(ctx, &store.SubscriptionListParams{Limit: 2, After: "sub_b"})
	require.NoError(t, err)
	require.False(t, page.More)
	require.Len(t, page.Subscriptions, 1)

	upd := *got
	upd.URL = "https://example.com/new"
	upd.State = herald.SubscriptionDisabled
	upd.DisabledReason = "manual"
	upd.RateLimit = nil
	out, err := s.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: &upd, Now: t0.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, "https://example.com/new", out.URL)
	require.Nil(t, out.RateLimit)
	_, err = s.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: newSub("sub_zz"), Now: t0})
	require.ErrorIs(t, err, herald.ErrNotFound)

	grace := t0.Add(24 * time.Hour)
	require.NoError(t, s.SubscriptionSecretRotate(ctx, &store.SubscriptionSecretRotateParams{
		ID: "sub_a", NewSecret: "whsec_2", GraceUntil: grace, Now: t0.Add(time.Minute)}))
	secs, err := s.SubscriptionSecretList(ctx, "sub_a")
	require.NoError(t, err)
	require.Len(t, secs, 2)
	require.Equal(t, "whsec_2", secs[0].Value)
	require.Nil(t, secs[0].ExpiresAt)
	require.Equal(t, grace, *secs[1].ExpiresAt)

	all, err := s.SubscriptionListAll(ctx)
	require.NoError(t, err)
	require.Len(t, all.Subscriptions, 3)
	require.Equal(t, v0.Subscriptions+5, all.Version) // 3 creates, 1 update, 1 rotation

	require.NoError(t, s.SubscriptionDelete(ctx, &store.SubscriptionDeleteParams{ID: "sub_b", Now: t0}))
	require.ErrorIs(t, s.SubscriptionDelete(ctx, &store.SubscriptionDeleteParams{ID: "sub_b", Now: t0}), herald.ErrNotFound)
	_, err = s.SubscriptionGet(ctx, "sub_b")
	require.ErrorIs(t, err, herald.ErrNotFound)
	_, err = s.SubscriptionSecretList(ctx, "sub_b")
	require.ErrorIs(t, err, herald.ErrNotFound)

	n, err := s.APITokenCount(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, s.APITokenCreate(ctx, &store.APITokenCreateParams{Hash: "h", Now: t0}))
	ok, err := s.APITokenExists(ctx, "h")
	require.NoError(t, err)
	require.True(t, ok)
}

func TestEventInsertMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.Postgres(t)
	createSub(ctx, t, s, "sub_a")
	createSub(ctx, t, s, "sub_b")

	v := int64(7)
	ev := func(id string) *herald.Event {
		return &herald.Event{ID: id, Type: "bundle.indexed", Key: "k", Version: &v,
			Data: json.RawMessage(`{"z": 1, "a": [1, 2]}`), CreatedAt: t0}
	}
	two := []store.DeliveryInsert{
		{ID: "dlv_1", SubscriptionID: "sub_a", NextAttemptAt: t0},
		{ID: "dlv_2", SubscriptionID: "sub_b", NextAttemptAt: t0},
	}
	res, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: t0, Events: []store.EventInsert{
		{Event: ev("e1"), Deliveries: two},
		{Event: ev("e2")},
		{Event: ev("e1"), Deliveries: []store.DeliveryInsert{{ID: "dlv_x", SubscriptionID: "sub_a", NextAttemptAt: t0}}},
	}})
	require.NoError(t, err)
	require.Equal(t, []store.EventInsertResult{
		{ID: "e1", DeliveryCount: 2},
		{ID: "e2"},
		{ID: "e1", Duplicate: true, DeliveryCount: 2},
	}, res)

	res, err = s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: t0, Events: []store.EventInsert{
		{Event: ev("e1"), Deliveries: []store.DeliveryInsert{{ID: "dlv_y", SubscriptionID: "sub_a", NextAttemptAt: t0}}},
		{Event: ev("e3")},
	}})
	require.NoError(t, err)
	require.Equal(t, []store.EventInsertResult{{ID: "e1", Duplicate: true, DeliveryCount: 2}, {ID: "e3"}}, res)

	got, err := s.EventGet(ctx, &store.EventGetParams{ID: "e1"})
	require.NoError(t, err)
	require.Equal(t, `{"z": 1, "a": [1, 2]}`, string(got.Event.Data))
	require.Equal(t, int64(7), *got.Event.Version)
	require.Len(t, got.Deliveries, 2)
	d := got.Deliveries[0]
	require.Equal(t, "dlv_1", d.ID)
	require.Equal(t, herald.DeliveryPending, d.State)
	require.Equal(t, "k", d.EventKey)
	require.Equal(t, int64(7), *d.EventVersion)

	_, err = s.EventGet(ctx, &store.EventGetParams{ID: "nope"})
	require.ErrorIs(t, err, herald.ErrNotFound)
	_, err = s.DeliveryGet(ctx, "nope")
	require.ErrorIs(t, err, herald.ErrNotFound)

	// A failing batch leaves nothing behind (invalid JSON in the last event).
	bad := ev("e4")
	bad.Data = json.RawMessage(`{`)
	_, err = s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: t0, Events: []store.EventInsert{{Event: ev("e5")}, {Event: bad}}})
	require.Error(t, err)
	_, err = s.EventGet(ctx, &store.EventGetParams{ID: "e5"})
	require.ErrorIs(t, err, herald.ErrNotFound)
}

func TestDeliveryLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.Postgres(t)
	createSub(ctx, t, s, "sub_a")
	createSub(ctx, t, s, "sub_b")
	// sub_a has a big backlog, sub_b one delivery: a claim of 4 gets sub_b's.
	insertEvents(ctx, t, s, "a", 20, t0, "sub_a")
	insertEvents(ctx, t, s, "b", 1, t0.Add(time.Second), "sub_b")
	insertEvents(ctx, t, s, "late", 1, t0.Add(time.Hour), "sub_a")

	next, err := s.DeliveryNextDue(ctx, &store.DeliveryNextDueParams{Tier: 0})
	require.NoError(t, err)
	require.Equal(t, t0, *next)

	now := t0.Add(2 * time.Second)
	claimed, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: 4, Now: now, LeaseOwner: "node1", LeaseUntil: now.Add(time.Second), LeaseMargin: time.Second,
	})
	require.NoError(t, err)
	require.Len(t, claimed, 4)
	perSub := map[string]int{}
	for _, c := range claimed {
		perSub[c.Delivery.SubscriptionID]++
		require.Equal(t, herald.DeliveryInFlight, c.Delivery.State)
		require.Equal(t, 1, c.Attempt)
		require.Equal(t, now.Add(herald.DefaultTimeout+time.Second), c.LeaseUntil)
		require.Equal(t, c.Delivery.SubscriptionID, c.Subscription.ID)
		require.Len(t, c.Secrets, 1)
		require.Equal(t, c.Delivery.EventID, c.Event.ID)
	}
	require.Equal(t, map[string]int{"sub_a": 3, "sub_b": 1}, perSub)
	for i := 1; i < len(claimed); i++ {
		require.False(t, claimed[i].Delivery.NextAttemptAt.Before(*claimed[i-1].Delivery.NextAttemptAt))
	}

	retryAt := now.Add(5 * time.Second)
	out, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{
		Now: now,
		Outcomes: []store.DeliveryOutcome{
			{DeliveryID: claimed[0].Delivery.ID, LeaseOwner: "node1", State: herald.DeliveryDelivered,
				Attempt: herald.Attempt{N: 1, At: now, DurationMS: 3, Status: 200}},
			{DeliveryID: claimed[1].Delivery.ID, LeaseOwner: "node1", State: herald.DeliveryPending, Tier: 1, NextAttemptAt: &retryAt,
				Attempt: herald.Attempt{N: 1, At: now, Status: 500, Error: herald.ErrorHTTPStatus, ResponseExcerpt: "boom"}},
			{DeliveryID: claimed[2].Delivery.ID, LeaseOwner: "node1", State: herald.DeliveryDead,
				Attempt: herald.Attempt{N: 1, At: now, Status: 410, Error: herald.ErrorGone}},
			{DeliveryID: claimed[3].Delivery.ID, LeaseOwner: "other", State: herald.DeliveryDelivered,
				Attempt: herald.Attempt{N: 1, At: now, Status: 200}},
		},
		DisableSubscriptions: []store.SubscriptionDisable{{ID: "sub_b", Reason: "gone"}},
		Events:               []store.EventInsert{{Event: &herald.Event{ID: "sys1", Type: herald.EventTypeDeliveryDead, Data: json.RawMessage(`{}`), CreatedAt: now}}},
	})
	require.NoError(t, err)
	require.Equal(t, 3, out.Applied)
	require.Equal(t, []string{claimed[3].Delivery.ID}, out.Stale)

	g, err := s.DeliveryGet(ctx, claimed[1].Delivery.ID)
	require.NoError(t, err)
	require.Equal(t, herald.DeliveryPending, g.Delivery.State)
	require.Equal(t, 1, g.Delivery.Tier)
	require.Equal(t, 1, g.Delivery.AttemptCount)
	require.Equal(t, retryAt, *g.Delivery.NextAttemptAt)
	require.Len(t, g.Attempts, 1)
	require.Equal(t, "boom", g.Attempts[0].ResponseExcerpt)

	g, err = s.DeliveryGet(ctx, claimed[3].Delivery.ID)
	require.NoError(t, err)
	require.Equal(t, herald.DeliveryInFlight, g.Delivery.State, "stale outcome leaves the state alone")
	require.Len(t, g.Attempts, 1, "stale outcome still records its attempt")

	sub, err := s.SubscriptionGet(ctx, "sub_b")
	require.NoError(t, err)
	require.Equal(t, herald.SubscriptionDisabled, sub.State)
	_, err = s.EventGet(ctx, &store.EventGetParams{ID: "sys1"})
	require.NoError(t, err)

	st, err := s.StatsGet(ctx, &store.StatsGetParams{Tiers: 3, Now: now})
	require.NoError(t, err)
	require.Len(t, st.Tiers, 3)
	require.Equal(t, int64(18), st.Tiers[0].Pending) // 21 - 3 claimed from sub_a
	require.Equal(t, int64(17), st.Tiers[0].Due)
	require.Equal(t, int64(1), st.Tiers[0].InFlight)
	require.Equal(t, 2*time.Second, st.Tiers[0].OldestPendingAge)
	require.Equal(t, int64(1), st.Tiers[1].Pending)
	require.Equal(t, int64(1), st.Dead)
	require.Equal(t, int64(1), st.DeliveredTotal)

	// Release, rescue, retry, redrive.
	n, err := s.DeliveryRelease(ctx, &store.DeliveryReleaseParams{IDs: []string{claimed[3].Delivery.ID}, LeaseOwner: "other", Now: now})
	require.NoError(t, err)
	require.Zero(t, n)
	c2, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 2, Now: now, LeaseOwner: "node2", LeaseUntil: now})
	require.NoError(t, err)
	require.Len(t, c2, 2)
	n, err = s.DeliveryRescue(ctx, &store.DeliveryRescueParams{Now: now.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 3, n)

	_, err = s.DeliveryRetry(ctx, &store.DeliveryRetryParams{ID: claimed[1].Delivery.ID, Now: now})
	require.ErrorIs(t, err, herald.ErrConflict)
	d, err := s.DeliveryRetry(ctx, &store.DeliveryRetryParams{ID: claimed[0].Delivery.ID, Now: now})
	require.NoError(t, err)
	require.Equal(t, herald.DeliveryPending, d.State)
	require.Equal(t, 0, d.Tier)

	n, err = s.DeadLetterRedrive(ctx, &store.DeadLetterRedriveParams{SubscriptionID: "sub_a", Since: now.Add(time.Second), Now: now})
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = s.DeadLetterRedrive(ctx, &store.DeadLetterRedriveParams{SubscriptionID: "sub_a", Now: now})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	list, err := s.DeliveryList(ctx, &store.DeliveryListParams{SubscriptionID: "sub_a", State: herald.DeliveryPending, Limit: 5})
	require.NoError(t, err)
	require.True(t, list.More)
	require.Len(t, list.Deliveries, 5)
	require.Greater(t, list.Deliveries[0].ID, list.Deliveries[1].ID)

	// Deleting a subscription cancels its unfinished deliveries; they cannot
	// be retried.
	require.NoError(t, s.SubscriptionDelete(ctx, &store.SubscriptionDeleteParams{ID: "sub_a", Now: now}))
	g, err = s.DeliveryGet(ctx, claimed[0].Delivery.ID)
	require.NoError(t, err)
	require.Equal(t, herald.DeliveryCancelled, g.Delivery.State)
	_, err = s.DeliveryRetry(ctx, &store.DeliveryRetryParams{ID: claimed[0].Delivery.ID, Now: now})
	require.ErrorIs(t, err, herald.ErrConflict)
	next, err = s.DeliveryNextDue(ctx, &store.DeliveryNextDueParams{Tier: 0})
	require.NoError(t, err)
	require.Nil(t, next, "no enabled subscription has pending work")
}

// TestClaimFairness: many subscriptions with uneven backlogs; every claim
// follows the ceil(Limit/k) rule.
func TestClaimFairness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.Postgres(t)
	backlog := map[string]int{"sub_1": 500, "sub_2": 3, "sub_3": 1, "sub_4": 40}
	for id, n := range backlog {
		createSub(ctx, t, s, id)
		insertEvents(ctx, t, s, id, n, t0, id)
	}
	c, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 20, Now: t0, LeaseOwner: "n", LeaseUntil: t0})
	require.NoError(t, err)
	got := map[string]int{}
	for _, d := range c {
		got[d.Delivery.SubscriptionID]++
	}
	// 4 subscriptions: sub_3 and sub_2 get all theirs (1+3); the other
	// 16 split evenly between the two big ones.
	require.Equal(t, map[string]int{"sub_1": 8, "sub_2": 3, "sub_3": 1, "sub_4": 8}, got)
}

// TestClaimConcurrentNodes: two stores (nodes) on one schema claim from the
// same tier at once; no delivery is claimed twice and together they claim
// all of it.
func TestClaimConcurrentNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	nodes := []store.Store{testdb.OpenPostgres(t, schema), testdb.OpenPostgres(t, schema)}
	const total = 1200
	subs := []string{"sub_a", "sub_b", "sub_c"}
	for _, id := range subs {
		createSub(ctx, t, nodes[0], id)
	}
	want := insertEvents(ctx, t, nodes[0], "e", total/len(subs), t0, subs...)

	var (
		mu  sync.Mutex
		got = map[string]string{}
		wg  sync.WaitGroup
	)
	errs := make(chan error, 8)
	start := make(chan struct{}) // all workers claim from the first moment
	for n, node := range nodes {
		for w := range 3 { // several workers per node
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("node%d-w%d", n, w)
				<-start
				for {
					c, err := node.DeliveryClaim(ctx, &store.DeliveryClaimParams{
						Tier: 0, Limit: 25, Now: t0, LeaseOwner: owner, LeaseUntil: t0.Add(time.Minute)})
					if err != nil {
						errs <- err
						return
					}
					if len(c) == 0 {
						// Empty can mean "the rest is locked by the other
						// claims": stop only once nothing is pending.
						st, err := node.StatsGet(ctx, &store.StatsGetParams{Tiers: 1, Now: t0})
						if err != nil {
							errs <- err
							return
						}
						if st.Tiers[0].Pending == 0 {
							return
						}
						continue
					}
					mu.Lock()
					for _, d := range c {
						if prev, dup := got[d.Delivery.ID]; dup {
							mu.Unlock()
							errs <- fmt.Errorf("delivery %s claimed by %s and %s", d.Delivery.ID, prev, owner)
							return
						}
						got[d.Delivery.ID] = owner
					}
					mu.Unlock()
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, got, len(want))
	for _, id := range want {
		require.Contains(t, got, id)
	}
	owners := map[string]bool{}
	for _, o := range got {
		owners[o[:5]] = true
	}
	require.Len(t, owners, 2, "both nodes claimed work")
}

// TestMigrateConcurrent: several nodes migrating a fresh schema at once all
// succeed, and the migrations are applied once.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	const n = 6
	var stores []*postgres.Store
	for range n {
		s, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL(), Schema: schema, MaxConns: 2})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Migrate(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	conn := schemaConn(ctx, t, schema)
	var applied, v1 int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE version = 1) FROM herald_migrations").Scan(&applied, &v1))
	require.Equal(t, 1, v1)
	require.NoError(t, stores[0].Migrate(ctx), "migrating again is a no-op")
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	s := testdb.OpenPostgres(t, schema)
	conn := schemaConn(ctx, t, schema)
	_, err := conn.Exec(ctx, "INSERT INTO herald_migrations (version, name) VALUES (9999, '9999_future.sql')")
	require.NoError(t, err)
	err = s.Migrate(ctx)
	require.ErrorContains(t, err, "newer than this herald")
}

func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ClosedPort", func(t *testing.T) {
		t.Parallel()
		// A port that was just free: nothing listens there.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		_, err = postgres.Open(ctx, postgres.Config{URL: "postgres://postgres@" + addr + "/test?sslmode=disable&connect_timeout=2"})
		require.ErrorIs(t, err, herald.ErrStoreUnavailable)
		_, err = postgres.Open(ctx, postgres.Config{URL: "postgres://postgres@" + addr + "/test?sslmode=disable&connect_timeout=2", Schema: "x"})
		require.ErrorIs(t, err, herald.ErrStoreUnavailable)
	})

	t.Run("ServerGoneAfterOpen", func(t *testing.T) {
		t.Parallel()
		// A proxy stands in for the server so the test can kill it.
		target := pgAddr(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		var (
			mu    sync.Mutex
			conns []net.Conn
		)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					_ = c.Close()
					continue
				}
				mu.Lock()
				conns = append(conns, c, up)
				mu.Unlock()
				go pipe(c, up)
				go pipe(up, c)
			}
		}()
		s, err := postgres.Open(ctx, postgres.Config{
			URL:    "postgres://postgres@" + l.Addr().String() + "/test?sslmode=disable&connect_timeout=2",
			Schema: testdb.PostgresSchema(t),
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		require.NoError(t, s.Migrate(ctx))
		require.NoError(t, s.Ping(ctx))

		// Stop the "server": refuse new connections, cut existing ones.
		require.NoError(t, l.Close())
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()

		_, err = s.SubscriptionGet(ctx, "sub_x")
		require.ErrorIs(t, err, herald.ErrStoreUnavailable)
		_, err = s.EventInsertMany(ctx, &store.EventInsertManyParams{Now: t0, Events: []store.EventInsert{
			{Event: &herald.Event{ID: "e", Type: "t", CreatedAt: t0}}}})
		require.ErrorIs(t, err, herald.ErrStoreUnavailable)
		require.ErrorIs(t, s.Ping(ctx), herald.ErrStoreUnavailable)
		_, err = s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 1, Now: t0, LeaseOwner: "n", LeaseUntil: t0})
		require.ErrorIs(t, err, herald.ErrStoreUnavailable)
	})

	t.Run("Closed", func(t *testing.T) {
		t.Parallel()
		s := testdb.Postgres(t)
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.Ping(ctx), herald.ErrStoreUnavailable)
		_, err := s.SubscriptionsVersion(ctx)
		require.ErrorIs(t, err, herald.ErrStoreUnavailable)
	})

	t.Run("NotFoundIsNotUnavailable", func(t *testing.T) {
		t.Parallel()
		s := testdb.Postgres(t)
		_, err := s.SubscriptionGet(ctx, "sub_nope")
		require.ErrorIs(t, err, herald.ErrNotFound)
		require.False(t, errors.Is(err, herald.ErrStoreUnavailable))
	})
}

func pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// pgAddr is host:port of the test server.
func pgAddr(t *testing.T) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(testdb.URL())
	require.NoError(t, err)
	return net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
}

// schemaConn is a plain connection to schema for assertions on raw tables.
func schemaConn(ctx context.Context, t *testing.T, schema string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(testdb.URL())
	require.NoError(t, err)
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestClaimRotateAfter: claims of one visit subscriptions in turn after
// RotateAfter, wrapping around.
func TestClaimRotateAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.Postgres(t)
	for _, id := range []string{"sub_1", "sub_2", "sub_3"} {
		createSub(ctx, t, s, id)
		insertEvents(ctx, t, s, id, 3, t0, id)
	}
	claimOne := func(after string) string {
		c, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
			Tier: 0, Limit: 1, Now: t0, LeaseOwner: "n", LeaseUntil: t0, RotateAfter: after})
		require.NoError(t, err)
		require.Len(t, c, 1)
		return c[0].Delivery.SubscriptionID
	}
	require.Equal(t, "sub_2", claimOne("sub_1"))
	require.Equal(t, "sub_3", claimOne("sub_2"))
	require.Equal(t, "sub_1", claimOne("sub_3"))
	require.Equal(t, "sub_1", claimOne("sub_0"))
}

// seedOld writes, in raw SQL, what createSub and insertEvents would have on
// an old schema (MigrateTo tests): today's store code may need columns of
// later migrations. It returns the delivery ids insertEvents would.
func seedOld(ctx context.Context, t *testing.T, schema, prefix string, n int, due time.Time, sub string) []string {
	t.Helper()
	conn := schemaConn(ctx, t, schema)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, q, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO subscriptions (id, url, method, ordering, state, created_at, updated_at)
		VALUES ($1, 'https://example.com/hook', 'POST', 'none', 'enabled', $2, $2)`, sub, t0)
	var ids []string
	for i := range n {
		evID := fmt.Sprintf("%s-evt-%06d", prefix, i)
		id := fmt.Sprintf("%s-dlv-%s-%06d", prefix, sub, i)
		exec(`INSERT INTO events (id, type, data, created_at, delivery_count) VALUES ($1, 't', '{"i":1}', $2, 1)`, evID, t0)
		exec(`INSERT INTO deliveries (id, event_id, subscription_id, state, tier, next_attempt_at, created_at, updated_at)
			VALUES ($1, $2, $3, 'pending', 0, $4, $5, $5)`, id, evID, sub, due, t0)
		ids = append(ids, id)
	}
	return ids
}
