package postgres_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
)

// TestThrottleBudgetSQL holds the throttle rule's SQL form (the set-based
// statements' throttleBudgetSQL and throttleReturnsSQL) to the Go rule,
// store.ThrottleState.Budget, over subscriptions with starts recorded by
// real claims, at times around their windows.
func TestThrottleBudgetSQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := testdb.Postgres(t).(*postgres.Store)
	subs := map[string]func(*herald.Subscription){
		"sub_rate":     func(x *herald.Subscription) { x.RateLimit = &herald.RateLimit{Max: 3, PerSeconds: 1} },
		"sub_inflight": func(x *herald.Subscription) { x.MaxInFlight = 2 },
		"sub_both":     func(x *herald.Subscription) { x.RateLimit, x.MaxInFlight = &herald.RateLimit{Max: 4, PerSeconds: 2}, 2 },
		"sub_paused":   func(x *herald.Subscription) { x.RateLimit = &herald.RateLimit{Max: 1, PerSeconds: 1} },
	}
	for id, mod := range subs {
		sub := newSub(id)
		mod(sub)
		_, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: "whsec_" + id, Now: t0})
		require.NoError(t, err)
		var events []store.EventInsert
		for i := range 6 {
			events = append(events, store.EventInsert{
				Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", CreatedAt: t0},
				Deliveries: []store.DeliveryInsert{{ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: id,
					NextAttemptAt: t0.Add(time.Duration(i) * time.Millisecond)}},
			})
		}
		_, err = s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: events, Now: t0})
		require.NoError(t, err)
	}
	// Starts at t0 and t0+400ms; one delivery finished, so in flight and
	// started differ; then a pause.
	claim := func(at time.Time, limit int) []*store.ClaimedDelivery {
		got, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Limit: limit, Now: at, LeaseOwner: "n", LeaseUntil: at.Add(time.Minute)})
		require.NoError(t, err)
		return got
	}
	first := claim(t0, 3)
	require.NotEmpty(t, first)
	claim(t0.Add(400*time.Millisecond), 10)
	_, err := s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: t0.Add(500 * time.Millisecond),
		Outcomes: []store.DeliveryOutcome{{DeliveryID: first[0].Delivery.ID, LeaseOwner: "n", State: herald.DeliveryDelivered,
			Tier: 0, Attempt: herald.Attempt{N: 1, At: t0.Add(500 * time.Millisecond), Status: 200}}},
		PauseSubscriptions: []store.SubscriptionPause{{ID: "sub_paused", Until: t0.Add(3 * time.Second)}}})
	require.NoError(t, err)

	for _, off := range []time.Duration{0, 399, 400, 500, 1099, 1100, 1101, 1500, 2099, 2100, 2500, 2999, 3000, 5000} {
		at := t0.Add(off * time.Millisecond)
		for id := range subs {
			goBudget, goReturns, sqlBudget, sqlReturns, ok, err := s.ThrottleBothWays(ctx, id, at)
			require.NoError(t, err)
			require.True(t, ok, id)
			if goBudget == math.MaxInt {
				goBudget = math.MaxInt32 // the SQL form's "unlimited"
			}
			require.Equal(t, goBudget, sqlBudget, "budget of %s at +%dms", id, off)
			require.True(t, goReturns.Equal(sqlReturns), "returns of %s at +%dms: go %v, sql %v", id, off, goReturns, sqlReturns)
		}
	}
}
