package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Broker sources (store/source.go, migration 017).

// newSource returns a source with every field set (its broker fields are
// amqp's and nats's at once: the store keeps whatever it is given),
// naming connection conn, not stored.
func newSource(name, conn string, mods ...func(*herald.Source)) *herald.Source {
	src := &herald.Source{
		Name: name, Type: herald.DestinationAMQP, Connection: conn,
		Queue: "orders", Stream: "ORDERS", Durable: "herald-d", Subject: "orders.>", Group: "g1", Topic: "a/+/b",
		Mapping: &herald.SourceMapping{
			ID: "headers.\"message-id\"", Type: "body.kind", Key: "body.order_id", Version: "body.v",
			Tenant: "headers.tenant", Data: "body.payload",
		},
		Tenant: "acme", Ordered: true, Enabled: true, Prefetch: 64,
		CreatedAt: now, UpdatedAt: now,
	}
	for _, mod := range mods {
		mod(src)
	}
	return src
}

func (b *bundle) createSource(t *testing.T, src *herald.Source) *herald.Source {
	t.Helper()
	out, err := b.store.SourceCreate(b.ctx, &store.SourceCreateParams{Source: src})
	require.NoError(t, err)
	return out
}

func (b *bundle) sourcesVersion(t *testing.T) int64 {
	t.Helper()
	v, err := b.store.SourcesVersion(b.ctx)
	require.NoError(t, err)
	return v
}

func (b *bundle) sourceStatus(t *testing.T, name string, at time.Time) *herald.SourceStatus {
	t.Helper()
	st, err := b.store.SourceStatusGet(b.ctx, &store.SourceStatusGetParams{Name: name, Now: at})
	require.NoError(t, err)
	return st
}

func (b *bundle) report(t *testing.T, params store.SourceReportParams) {
	t.Helper()
	require.NoError(t, b.store.SourceReport(b.ctx, &params))
}

func (b *bundle) lease(t *testing.T, source, node string, at time.Time) bool {
	t.Helper()
	held, err := b.store.SourceLeaseAcquire(b.ctx, &store.SourceLeaseParams{Source: source, Node: node, TTL: 10 * time.Second, Now: at})
	require.NoError(t, err)
	return held
}

// rejects returns n rejects numbered from first (message "m<i>").
func rejects(first, n int) []herald.SourceReject {
	out := make([]herald.SourceReject, n)
	for i := range out {
		k := first + i
		out[i] = herald.SourceReject{
			At: now.Add(time.Duration(k) * time.Millisecond), Reason: herald.RejectNotJSON,
			Message: fmt.Sprintf("m%d", k), MessageID: fmt.Sprintf("id-%d", k), Excerpt: "{oops",
		}
	}
	return out
}

// requireRejectRange: got holds the rejects numbered last down to first
// (newest first), each from node.
func requireRejectRange(t *testing.T, got []herald.SourceReject, first, last int, node string) {
	t.Helper()
	require.Len(t, got, last-first+1)
	for i, r := range got {
		require.Equal(t, fmt.Sprintf("m%d", last-i), r.Message, "reject %d", i)
		require.Equal(t, node, r.Node)
	}
}

// SourceRejectCounter is implemented, in the backend's own tests only, by
// a store that counts the reject rows it holds for a source: reads show at
// most herald.SourceRecentRejects whatever is stored, so only the count
// proves a report trims.
type SourceRejectCounter interface {
	SourceRejectsStored(ctx context.Context, source string) (int64, error)
}

func testSource(t *testing.T, newStore NewStoreFunc) {
	t.Run("CreateGetUpdate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		b.createConnection(t, newConnection("nats", func(c *herald.Connection) { c.Type = herald.DestinationNATS }))

		want := newSource("orders", "rabbit")
		got := b.createSource(t, want)
		require.Equal(t, want, got)
		read, err := b.store.SourceGet(b.ctx, "orders")
		require.NoError(t, err)
		require.Equal(t, want, read)

		// No mapping, nothing optional: read back as written.
		bare := &herald.Source{Name: "bare", Type: herald.DestinationNATS, Connection: "nats", Stream: "S",
			CreatedAt: now, UpdatedAt: now}
		require.Equal(t, bare, b.createSource(t, bare))
		read, err = b.store.SourceGet(b.ctx, "bare")
		require.NoError(t, err)
		require.Equal(t, bare, read)

		_, err = b.store.SourceCreate(b.ctx, &store.SourceCreateParams{Source: newSource("orders", "rabbit")})
		require.ErrorIs(t, err, herald.ErrConflict)

		// Every field but Name and CreatedAt changes; the mapping goes.
		upd := &herald.Source{
			Name: "orders", Type: herald.DestinationNATS, Connection: "nats", Stream: "ORDERS2",
			Durable: "d2", Subject: "x.y", Tenant: "", Ordered: false, Enabled: false, Prefetch: 0,
			CreatedAt: now.Add(time.Hour), UpdatedAt: now.Add(time.Minute),
		}
		res, err := b.store.SourceUpdate(b.ctx, &store.SourceUpdateParams{Source: upd})
		require.NoError(t, err)
		wantUpd := *upd
		wantUpd.CreatedAt = now
		require.Equal(t, &wantUpd, res)
		read, err = b.store.SourceGet(b.ctx, "orders")
		require.NoError(t, err)
		require.Equal(t, &wantUpd, read)

		// And a mapping comes back.
		upd.Mapping = &herald.SourceMapping{Data: "body"}
		res, err = b.store.SourceUpdate(b.ctx, &store.SourceUpdateParams{Source: upd})
		require.NoError(t, err)
		require.Equal(t, &herald.SourceMapping{Data: "body"}, res.Mapping)

		_, err = b.store.SourceGet(b.ctx, "nope")
		require.ErrorIs(t, err, herald.ErrNotFound)
		_, err = b.store.SourceUpdate(b.ctx, &store.SourceUpdateParams{Source: newSource("nope", "rabbit")})
		require.ErrorIs(t, err, herald.ErrNotFound)
		require.ErrorIs(t, b.store.SourceDelete(b.ctx, "nope"), herald.ErrNotFound)

		require.NoError(t, b.store.SourceDelete(b.ctx, "orders"))
		_, err = b.store.SourceGet(b.ctx, "orders")
		require.ErrorIs(t, err, herald.ErrNotFound)
		require.ErrorIs(t, b.store.SourceDelete(b.ctx, "orders"), herald.ErrNotFound)
	})

	t.Run("MissingConnection", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		requireMissing := func(err error) {
			t.Helper()
			var he *herald.Error
			require.True(t, errors.As(err, &he), "%v", err)
			require.Equal(t, store.ErrSourceConnectionMissing("ghost"), he)
		}
		v := b.sourcesVersion(t)
		_, err := b.store.SourceCreate(b.ctx, &store.SourceCreateParams{Source: newSource("s", "ghost")})
		requireMissing(err)
		_, err = b.store.SourceGet(b.ctx, "s")
		require.ErrorIs(t, err, herald.ErrNotFound, "the failed create stored nothing")

		b.createConnection(t, newConnection("rabbit"))
		src := b.createSource(t, newSource("s", "rabbit"))
		upd := *src
		upd.Connection, upd.Queue = "ghost", "other"
		_, err = b.store.SourceUpdate(b.ctx, &store.SourceUpdateParams{Source: &upd})
		requireMissing(err)
		read, err := b.store.SourceGet(b.ctx, "s")
		require.NoError(t, err)
		require.Equal(t, src, read, "the failed update changed nothing")
		require.Equal(t, v+1, b.sourcesVersion(t), "only the create moved the version")
	})

	t.Run("ListPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		// Byte order: upper case sorts before lower case, '-' before
		// digits.
		names := []string{"B", "a", "a-1", "a1", "b"}
		for _, n := range []string{"b", "a1", "B", "a-1", "a"} {
			b.createSource(t, newSource(n, "rabbit"))
		}
		for _, limit := range []int{1, 2, 4, 5, 6} {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 10)
				res, err := b.store.SourceList(b.ctx, &store.SourceListParams{Limit: limit, After: after})
				require.NoError(t, err)
				require.LessOrEqual(t, len(res.Sources), limit)
				for _, s := range res.Sources {
					require.Equal(t, newSource(s.Name, "rabbit"), s)
					got = append(got, s.Name)
				}
				if !res.More {
					break
				}
				after = res.Sources[len(res.Sources)-1].Name
			}
			require.Equal(t, names, got, "limit %d", limit)
		}
		// Limit 0: every source, however many.
		for i := range 120 {
			b.createSource(t, newSource(fmt.Sprintf("z%03d", i), "rabbit"))
		}
		res, err := b.store.SourceList(b.ctx, &store.SourceListParams{})
		require.NoError(t, err)
		require.Len(t, res.Sources, 125)
		require.False(t, res.More)
		res, err = b.store.SourceList(b.ctx, &store.SourceListParams{After: "z118"})
		require.NoError(t, err)
		require.Len(t, res.Sources, 1)
		require.Equal(t, "z119", res.Sources[0].Name)
	})

	t.Run("Version", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		v0 := b.sourcesVersion(t)
		src := b.createSource(t, newSource("s", "rabbit"))
		v1 := b.sourcesVersion(t)
		require.Greater(t, v1, v0, "create")

		upd := *src
		upd.Enabled = false
		_, err := b.store.SourceUpdate(b.ctx, &store.SourceUpdateParams{Source: &upd})
		require.NoError(t, err)
		v2 := b.sourcesVersion(t)
		require.Greater(t, v2, v1, "update")

		// Reports and leases are not changes of the source.
		b.report(t, store.SourceReportParams{Source: "s", Node: ownerA, State: herald.SourceConsuming, Consumed: 1, Now: now})
		require.True(t, b.lease(t, "s", ownerA, now))
		require.Equal(t, v2, b.sourcesVersion(t), "report and lease")

		require.NoError(t, b.store.SourceDelete(b.ctx, "s"))
		require.Greater(t, b.sourcesVersion(t), v2, "delete")
	})

	t.Run("Report", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		b.createSource(t, newSource("s", "rabbit"))

		st := b.sourceStatus(t, "s", now)
		require.Equal(t, &herald.SourceStatus{State: "idle", Nodes: []herald.SourceNodeStatus{},
			RecentRejects: []herald.SourceReject{}}, st, "nobody reported yet")

		t1, t2 := now.Add(time.Second), now.Add(2*time.Second)
		b.report(t, store.SourceReportParams{Source: "s", Node: ownerA, State: herald.SourceConnecting,
			Consumed: 10, Duplicates: 1, Rejected: 2, LastError: "dial: refused", Pending: ptr[int64](7),
			Rejects: rejects(1, 2), Now: t1})
		b.report(t, store.SourceReportParams{Source: "s", Node: ownerB, State: herald.SourceFailed,
			Consumed: 5, LastError: "boom", Now: t1})
		// node-a again: counters add up; state, error and pending are
		// replaced (pending unknown now).
		b.report(t, store.SourceReportParams{Source: "s", Node: ownerA, State: herald.SourceConsuming,
			Consumed: 3, Duplicates: 2, Rejected: 1, Rejects: rejects(3, 1), Now: t2})

		nodes := []herald.SourceNodeStatus{
			{Node: ownerA, State: herald.SourceConsuming, Consumed: 13, Duplicates: 3, Rejected: 3, UpdatedAt: t2},
			{Node: ownerB, State: herald.SourceFailed, Consumed: 5, LastError: "boom", UpdatedAt: t1},
		}
		wantRejects := rejects(1, 3)
		for i := range wantRejects {
			wantRejects[i].Node = ownerA
		}
		// Newest first.
		wantRejects[0], wantRejects[2] = wantRejects[2], wantRejects[0]
		want := herald.CombineSourceStatus(nodes, wantRejects, t2)
		require.Equal(t, herald.SourceConsuming, want.State)
		require.Equal(t, "boom", want.LastError)
		require.EqualValues(t, 18, want.Consumed)
		require.Equal(t, &want, b.sourceStatus(t, "s", t2))

		// node-b reports pending; node-a goes stale: the state is node-b's
		// and the counters still count both.
		late := t2.Add(herald.SourceNodeStale + time.Second)
		b.report(t, store.SourceReportParams{Source: "s", Node: ownerB, State: herald.SourceFailed,
			LastError: "boom again", Pending: ptr[int64](0), Now: late})
		st = b.sourceStatus(t, "s", late)
		require.Equal(t, herald.SourceFailed, st.State)
		require.Equal(t, "boom again", st.LastError)
		require.Equal(t, ptr[int64](0), st.Pending)
		require.EqualValues(t, 18, st.Consumed)
		require.Len(t, st.Nodes, 2)

		_, err := b.store.SourceStatusGet(b.ctx, &store.SourceStatusGetParams{Name: "nope", Now: now})
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	// The store keeps exactly the newest herald.SourceRecentRejects per
	// source: 99 and 100 stay whole, the 101st pushes the oldest out.
	t.Run("RejectsTrimmed", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, 100, herald.SourceRecentRejects, "the boundaries below assume 100")
		b := setup(t, newStore)
		counter, ok := b.store.(SourceRejectCounter)
		require.True(t, ok, "the backend's tests must give the store SourceRejectsStored (storetest.SourceRejectCounter)")
		b.createConnection(t, newConnection("rabbit"))
		b.createSource(t, newSource("s", "rabbit"))
		b.createSource(t, newSource("other", "rabbit"))
		report := func(node string, first, n int) {
			t.Helper()
			b.report(t, store.SourceReportParams{Source: "s", Node: node, State: herald.SourceConsuming,
				Rejected: int64(n), Rejects: rejects(first, n), Now: now})
			stored, err := counter.SourceRejectsStored(b.ctx, "s")
			require.NoError(t, err)
			require.EqualValues(t, min(first+n-1, herald.SourceRecentRejects), stored, "rows stored after m%d", first+n-1)
		}
		b.report(t, store.SourceReportParams{Source: "other", Node: ownerA, State: herald.SourceConsuming,
			Rejects: rejects(1000, 5), Now: now})

		report(ownerA, 1, 99)
		requireRejectRange(t, b.sourceStatus(t, "s", now).RecentRejects, 1, 99, ownerA)
		report(ownerA, 100, 1)
		requireRejectRange(t, b.sourceStatus(t, "s", now).RecentRejects, 1, 100, ownerA)
		report(ownerA, 101, 1)
		requireRejectRange(t, b.sourceStatus(t, "s", now).RecentRejects, 2, 101, ownerA)

		// One report with more than 100: its newest 100 are kept, and
		// another node's rejects count toward the same source.
		report(ownerB, 200, 150)
		st := b.sourceStatus(t, "s", now)
		requireRejectRange(t, st.RecentRejects, 250, 349, ownerB)
		require.EqualValues(t, 251, st.Rejected, "the counters are not trimmed")
		report(ownerA, 400, 2)
		st = b.sourceStatus(t, "s", now)
		require.Len(t, st.RecentRejects, 100)
		require.Equal(t, "m401", st.RecentRejects[0].Message)
		require.Equal(t, ownerA, st.RecentRejects[0].Node)
		require.Equal(t, "m252", st.RecentRejects[99].Message)
		require.Equal(t, rejects(401, 1)[0].At, st.RecentRejects[0].At.UTC())
		require.Equal(t, "id-401", st.RecentRejects[0].MessageID)
		require.Equal(t, "{oops", st.RecentRejects[0].Excerpt)
		require.Equal(t, herald.RejectNotJSON, st.RecentRejects[0].Reason)

		// Another source's rejects are its own.
		requireRejectRange(t, b.sourceStatus(t, "other", now).RecentRejects, 1000, 1004, ownerA)
	})

	t.Run("ReportMissingSource", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.report(t, store.SourceReportParams{Source: "ghost", Node: ownerA, State: herald.SourceConsuming,
			Consumed: 1, Rejects: rejects(1, 1), Now: now})
		b.createConnection(t, newConnection("rabbit"))
		b.createSource(t, newSource("ghost", "rabbit"))
		st := b.sourceStatus(t, "ghost", now)
		require.Empty(t, st.Nodes, "the report before the source existed left nothing")
		require.Empty(t, st.RecentRejects)
	})

	t.Run("DeleteCascades", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		b.createSource(t, newSource("s", "rabbit"))
		b.createSource(t, newSource("keep", "rabbit"))
		for _, name := range []string{"s", "keep"} {
			b.report(t, store.SourceReportParams{Source: name, Node: ownerA, State: herald.SourceConsuming,
				Consumed: 4, Rejects: rejects(1, 3), Now: now})
			require.True(t, b.lease(t, name, ownerA, now))
		}
		require.NoError(t, b.store.SourceDelete(b.ctx, "s"))
		_, err := b.store.SourceStatusGet(b.ctx, &store.SourceStatusGetParams{Name: "s", Now: now})
		require.ErrorIs(t, err, herald.ErrNotFound)

		// Re-created under the same name, it starts empty and unleased.
		b.createSource(t, newSource("s", "rabbit"))
		st := b.sourceStatus(t, "s", now)
		require.Empty(t, st.Nodes)
		require.Empty(t, st.RecentRejects)
		require.Zero(t, st.Consumed)
		require.True(t, b.lease(t, "s", ownerB, now), "the old lease went with the source")

		// The other source kept everything.
		st = b.sourceStatus(t, "keep", now)
		require.Len(t, st.Nodes, 1)
		require.Len(t, st.RecentRejects, 3)
		require.False(t, b.lease(t, "keep", ownerB, now))
	})

	// A report or lease racing the source's delete: both succeed (the
	// report and lease of a deleted source do nothing) and nothing of the
	// old source is left for one re-created under its name.
	t.Run("DeleteRacesReport", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		for i := range 20 {
			name := fmt.Sprintf("race-%d", i)
			b.createSource(t, newSource(name, "rabbit"))
			var repErr, leaseErr, delErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				repErr = b.store.SourceReport(b.ctx, &store.SourceReportParams{Source: name, Node: ownerA,
					State: herald.SourceConsuming, Consumed: 1, Rejects: rejects(1, 2), Now: now})
			})
			wg.Go(func() {
				_, leaseErr = b.store.SourceLeaseAcquire(b.ctx, &store.SourceLeaseParams{Source: name, Node: ownerA, TTL: time.Minute, Now: now})
			})
			wg.Go(func() { delErr = b.store.SourceDelete(b.ctx, name) })
			wg.Wait()
			require.NoError(t, repErr, "round %d", i)
			require.NoError(t, leaseErr, "round %d", i)
			require.NoError(t, delErr, "round %d", i)
			b.createSource(t, newSource(name, "rabbit"))
			st := b.sourceStatus(t, name, now)
			require.Empty(t, st.Nodes, "round %d", i)
			require.Empty(t, st.RecentRejects, "round %d", i)
			require.True(t, b.lease(t, name, ownerB, now), "round %d", i)
		}
	})

	t.Run("Lease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		b.createSource(t, newSource("s", "rabbit"))
		b.createSource(t, newSource("t", "rabbit"))
		const ttl = 10 * time.Second

		require.True(t, b.lease(t, "s", ownerA, now), "free: taken")
		require.False(t, b.lease(t, "s", ownerB, now), "held by another node")
		require.True(t, b.lease(t, "t", ownerB, now), "leases are per source")
		require.True(t, b.lease(t, "s", ownerA, now.Add(5*time.Second)), "renewed: until now+15s")
		require.False(t, b.lease(t, "s", ownerB, now.Add(ttl)), "the renewal moved the expiry")
		require.False(t, b.lease(t, "s", ownerB, now.Add(15*time.Second-time.Millisecond)), "not expired yet")
		require.True(t, b.lease(t, "s", ownerB, now.Add(15*time.Second)), "expired: taken over")
		require.False(t, b.lease(t, "s", ownerA, now.Add(16*time.Second)), "the old holder lost it")

		// Release by a node that does not hold it does nothing; by the
		// holder, frees it at once.
		rel := func(node string) {
			t.Helper()
			require.NoError(t, b.store.SourceLeaseRelease(b.ctx, &store.SourceLeaseParams{Source: "s", Node: node}))
		}
		rel(ownerA)
		require.False(t, b.lease(t, "s", ownerA, now.Add(17*time.Second)))
		rel(ownerB)
		require.True(t, b.lease(t, "s", ownerA, now.Add(17*time.Second)), "released: free")
		require.NoError(t, b.store.SourceLeaseRelease(b.ctx, &store.SourceLeaseParams{Source: "ghost", Node: ownerA}))

		require.False(t, b.lease(t, "ghost", ownerA, now), "no lease of a source that does not exist")
	})

	t.Run("LeaseRace", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		for round := range 5 {
			name := fmt.Sprintf("s%d", round)
			b.createSource(t, newSource(name, "rabbit"))
			const n = 8
			held := make([]bool, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					held[i], errs[i] = b.store.SourceLeaseAcquire(b.ctx, &store.SourceLeaseParams{
						Source: name, Node: fmt.Sprintf("node-%d", i), TTL: time.Minute, Now: now,
					})
				})
			}
			close(start)
			wg.Wait()
			winners := 0
			for i := range n {
				require.NoError(t, errs[i], "round %d node %d", round, i)
				if held[i] {
					winners++
				}
			}
			require.Equal(t, 1, winners, "round %d", round)
		}
	})

	t.Run("ConnectionInUse", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createConnection(t, newConnection("rabbit"))
		b.createSource(t, newSource("s-b", "rabbit"))
		b.createSource(t, newSource("s-a", "rabbit"))

		err := b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "rabbit"})
		require.ErrorIs(t, err, herald.ErrConflict)
		var inUse *store.ConnectionInUseError
		require.True(t, errors.As(err, &inUse), "%T", err)
		require.Equal(t, &store.ConnectionInUseError{Name: "rabbit", SourceName: "s-a"}, inUse)
		require.Equal(t, herald.CodeConflict, herald.ErrorCode(err))
		require.Contains(t, err.Error(), "s-a")

		// A subscription using it is named first.
		dest := herald.Destination{Type: herald.DestinationAMQP, Connection: "rabbit", Exchange: "x"}
		sub := b.createSub(t, func(s *herald.Subscription) { s.URL, s.Method, s.Destination = "", "", dest })
		err = b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "rabbit"})
		require.True(t, errors.As(err, &inUse), "%v", err)
		require.Equal(t, sub.ID, inUse.SubscriptionID)
		require.NoError(t, b.store.SubscriptionDelete(b.ctx, &store.SubscriptionDeleteParams{ID: sub.ID, Now: now}))

		// Moving a source to another connection frees this one.
		b.createConnection(t, newConnection("rabbit2"))
		require.NoError(t, b.store.SourceDelete(b.ctx, "s-a"))
		upd := newSource("s-b", "rabbit2")
		_, err = b.store.SourceUpdate(b.ctx, &store.SourceUpdateParams{Source: upd})
		require.NoError(t, err)
		require.NoError(t, b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "rabbit"}))
		err = b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: "rabbit2"})
		require.True(t, errors.As(err, &inUse), "%v", err)
		require.Equal(t, "s-b", inUse.SourceName)
	})

	// A source create racing a delete of its connection: either the
	// delete sees the source (conflict) or the create finds the connection
	// gone, never both succeeding.
	t.Run("ConnectionDeleteRacesCreate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for i := range 20 {
			name := fmt.Sprintf("race-%d", i)
			b.createConnection(t, newConnection(name))
			var srcErr, delErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				_, srcErr = b.store.SourceCreate(b.ctx, &store.SourceCreateParams{Source: newSource(name, name)})
			})
			wg.Go(func() { delErr = b.store.ConnectionDelete(b.ctx, &store.ConnectionDeleteParams{Name: name}) })
			wg.Wait()
			if delErr == nil {
				require.Error(t, srcErr, "round %d: the connection was deleted and a source names it", i)
				require.Equal(t, herald.CodeInvalidField, herald.ErrorCode(srcErr), "%v", srcErr)
			} else {
				require.ErrorIs(t, delErr, herald.ErrConflict, "round %d", i)
				require.NoError(t, srcErr, "round %d", i)
			}
		}
	})
}
