package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testCounts covers the counters behind Stats.Dead, Skipped and Superseded
// (issue 10, item 15): StatsGet no longer counts the finished history, so
// the counters must follow every change of state — completion, retry,
// redrive, the latest ordering's skip and supersede, retention — and match
// what the rows say at every step.
func testCounts(t *testing.T, newStore NewStoreFunc) {
	t.Run("FollowEveryChange", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		b.requireCounts(t, 0, 0, 0)

		// Five deaths in one completion, one more alone.
		ids := b.publishMany(t, 6, sub.ID, spaced(now.Add(-time.Hour)))
		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Len(t, claimed, 6)
		var outs []store.DeliveryOutcome
		for _, c := range claimed[:5] {
			outs = append(outs, died(c, ownerA, now))
		}
		b.complete(t, now, outs...)
		b.requireCounts(t, 5, 0, 0)
		b.complete(t, now, died(claimed[5], ownerA, now))
		b.requireCounts(t, 6, 0, 0)
		// A stale outcome changes nothing.
		b.complete(t, now, died(claimed[5], ownerA, now))
		b.requireCounts(t, 6, 0, 0)

		// Retry one, redrive two by time (updated_at is when they died).
		_, err := b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: ids[0], Now: now})
		require.NoError(t, err)
		b.requireCounts(t, 5, 0, 0)
		later := now.Add(time.Minute)
		c := b.claimOne(t, 0, ownerA, later, ids[0])
		b.complete(t, later, died(c, ownerA, later)) // dies again, a minute later
		b.requireCounts(t, 6, 0, 0)
		n, err := b.store.DeadLetterRedrive(b.ctx, &store.DeadLetterRedriveParams{
			SubscriptionID: sub.ID, Since: later, Now: later,
		})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.requireCounts(t, 5, 0, 0)
		n, err = b.store.DeadLetterRedrive(b.ctx, &store.DeadLetterRedriveParams{SubscriptionID: sub.ID, Now: later})
		require.NoError(t, err)
		require.Equal(t, 5, n)
		b.requireCounts(t, 0, 0, 0)
		claimed = b.claim(t, store.DeliveryClaimParams{Now: later})
		require.Len(t, claimed, 6)
		outs = outs[:0]
		for _, c := range claimed {
			outs = append(outs, died(c, ownerA, later))
		}
		b.complete(t, later, outs...)
		b.requireCounts(t, 6, 0, 0)

		// Skipped and superseded (ordering latest).
		latest := b.createOrderedSub(t, herald.OrderingLatest, 0)
		v1 := b.publishKeyed(t, now, latest.ID, "k", ptr[int64](1))
		v3 := b.publishKeyed(t, now.Add(time.Millisecond), latest.ID, "k", ptr[int64](3))
		v2 := b.publishKeyed(t, now.Add(2*time.Millisecond), latest.ID, "k", ptr[int64](2))
		c3 := b.claimOne(t, 0, ownerA, later, v3)
		b.requireState(t, herald.DeliverySuperseded, v1, v2)
		b.requireCounts(t, 6, 0, 2)
		b.complete(t, later, delivered(c3, ownerA, later))
		stale := b.publishKeyed(t, later, latest.ID, "k", ptr[int64](2))
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: later}))
		b.requireState(t, herald.DeliverySkipped, stale)
		b.requireCounts(t, 6, 1, 2)
		// Retried, a superseded delivery leaves its count.
		_, err = b.store.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{ID: v1, Now: later})
		require.NoError(t, err)
		b.requireCounts(t, 6, 1, 1)

		// Retention: the dead letters and the unsent ones go, and their
		// counts with them.
		res, err := b.store.RetentionSweep(b.ctx, &store.RetentionSweepParams{
			Delivered: time.Hour, Dead: time.Hour, BatchSize: 2, Now: later.Add(2 * time.Hour),
		})
		require.NoError(t, err)
		require.Equal(t, 6, res.Dead)
		b.requireCounts(t, 0, 0, 0)
	})
}

// requireCounts checks StatsGet's dead, skipped and superseded counts
// against the rows themselves.
func (b *bundle) requireCounts(t *testing.T, dead, skipped, superseded int64) {
	t.Helper()
	rows := func(state herald.DeliveryState) int64 {
		var n int64
		params := &store.DeliveryListParams{State: state, Limit: store.MaxPageLimit}
		for {
			page, err := b.store.DeliveryList(b.ctx, params)
			require.NoError(t, err)
			n += int64(len(page.Deliveries))
			if !page.More {
				return n
			}
			params.Before = page.Deliveries[len(page.Deliveries)-1].ID
		}
	}
	st, err := b.store.StatsGet(b.ctx, &store.StatsGetParams{Tiers: 1, Now: now})
	require.NoError(t, err)
	require.Equal(t, []int64{dead, skipped, superseded}, []int64{st.Dead, st.Skipped, st.Superseded}, "counters")
	require.Equal(t, []int64{dead, skipped, superseded},
		[]int64{rows(herald.DeliveryDead), rows(herald.DeliverySkipped), rows(herald.DeliverySuperseded)}, "rows")
}
