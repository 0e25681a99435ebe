package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testThrottleClaimClock: a rate-limited claim records its request starts
// at DeliveryClaimParams.Clock, read once the claim holds its locks, not at
// the Now its caller took before the claim waited for them.
func testThrottleClaimClock(t *testing.T, newStore NewStoreFunc) {
	for _, ordering := range []herald.Ordering{herald.OrderingNone, herald.OrderingFIFO} {
		t.Run(string(ordering), func(t *testing.T) {
			t.Parallel()
			b := setup(t, newStore)
			sub := b.createSub(t, func(s *herald.Subscription) {
				s.Ordering, s.KeyIntervalMS = ordering, 0
				s.RateLimit = &herald.RateLimit{Max: 1, PerSeconds: 1}
			})
			var ids []string
			for i := range 4 {
				ids = append(ids, b.publishKeyed(t, now.Add(-time.Minute+time.Duration(i)*time.Millisecond),
					sub.ID, fmt.Sprintf("k%d", i), nil))
			}

			// The claim's Now is now; it waited 2 s for the locks.
			started := now.Add(2 * time.Second)
			calls := 0
			claimed := b.claim(t, store.DeliveryClaimParams{Limit: 1, Clock: func() time.Time {
				calls++
				return started
			}})
			require.Equal(t, ids[:1], claimedIDs(claimed))
			// Once: a key's last send (fifo) and the throttled start are
			// the one start the caller bounds lateness from.
			require.Equal(t, 1, calls, "the claim read its clock once")

			// Its start counts from +2 s: at +1.5 s (a Now-based start
			// would have left the window at +1.1 s) there is no budget.
			at := now.Add(1500 * time.Millisecond)
			require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: at}))
			b.requireWaitingFor(t, at, ids[1], store.WaitingForRateLimit)
			requireTimeEqual(t, started.Add(window), *nextDue(t, b, 0, at))
			require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: started.Add(window - time.Millisecond)}))

			// A clock behind Now counts as Now.
			at = started.Add(window)
			require.Equal(t, ids[1:2], claimedIDs(b.claim(t, store.DeliveryClaimParams{Limit: 1, Now: at,
				Clock: func() time.Time { return at.Add(-time.Hour) }})))
			require.Empty(t, b.claim(t, store.DeliveryClaimParams{Now: at.Add(window - time.Millisecond)}))
			require.Equal(t, ids[2:3], claimedIDs(b.claim(t, store.DeliveryClaimParams{Limit: 1, Now: at.Add(window)})))
		})
	}
}

func nextDue(t *testing.T, b *bundle, tier int, at time.Time) *time.Time {
	t.Helper()
	next, err := b.store.DeliveryNextDue(b.ctx, &store.DeliveryNextDueParams{Tier: tier, Now: at})
	require.NoError(t, err)
	return next
}
