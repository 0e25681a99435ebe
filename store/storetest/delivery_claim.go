package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func testDeliveryClaim(t *testing.T, newStore NewStoreFunc) {
	t.Run("DueOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, late := b.publish(t, now.Add(-time.Second), sub.ID)
		_, exact := b.publish(t, now, sub.ID) // due exactly at Now counts
		_, future := b.publish(t, now.Add(time.Minute), sub.ID)

		claimed := b.claim(t, store.DeliveryClaimParams{})
		require.Equal(t, []string{late[0], exact[0]}, claimedIDs(claimed), "due ones, in next_attempt_at order")
		for _, c := range claimed {
			require.Equal(t, herald.DeliveryInFlight, c.Delivery.State)
		}
		b.requireState(t, herald.DeliveryInFlight, late[0], exact[0])
		b.requireState(t, herald.DeliveryPending, future[0])

		// A minute later the future one is due.
		require.Equal(t, future, claimedIDs(b.claim(t, store.DeliveryClaimParams{Now: now.Add(time.Minute)})))
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{}))
		b.createSub(t)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Tier: 3}))
	})

	t.Run("NeverTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID, sub.ID)

		first := b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseOwner: ownerA})
		second := b.claim(t, store.DeliveryClaimParams{Limit: 1, LeaseOwner: ownerB})
		require.Len(t, first, 1)
		require.Len(t, second, 1)
		require.ElementsMatch(t, ids, []string{first[0].Delivery.ID, second[0].Delivery.ID})
		// Both leased: nothing left, even for a large limit, while leases hold.
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{LeaseOwner: ownerB, Now: now.Add(30 * time.Second)}))
	})

	t.Run("LimitAndOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		// Published newest-due first; claimed earliest-due first.
		var ids []string
		for i := 5; i >= 1; i-- {
			_, d := b.publish(t, now.Add(-time.Duration(i)*time.Second), sub.ID)
			ids = append(ids, d[0])
		}
		require.Equal(t, ids[:3], claimedIDs(b.claim(t, store.DeliveryClaimParams{Limit: 3})))
		require.Equal(t, ids[3:], claimedIDs(b.claim(t, store.DeliveryClaimParams{Limit: 3})))
	})

	// Claims of Limit 1 with RotateAfter = the subscription served last
	// visit every subscription with due work in turn, wrapping around,
	// however old the others' backlogs are.
	t.Run("RotateAfterRoundRobin", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		subs := []*herald.Subscription{b.createSub(t), b.createSub(t), b.createSub(t)}
		slices.SortFunc(subs, func(x, y *herald.Subscription) int {
			if x.ID < y.ID {
				return -1
			}
			return 1
		})
		// The first subscription's backlog is the oldest by far.
		b.publishMany(t, 5, subs[0].ID, func(i int) time.Time { return now.Add(-time.Hour - time.Duration(i)*time.Second) })
		b.publishMany(t, 5, subs[1].ID, func(int) time.Time { return now })
		b.publishMany(t, 5, subs[2].ID, func(int) time.Time { return now })

		after := ""
		var served []string
		for i := 0; i < 6; i++ {
			claimed := b.claim(t, store.DeliveryClaimParams{Limit: 1, RotateAfter: after})
			require.Len(t, claimed, 1)
			after = claimed[0].Delivery.SubscriptionID
			served = append(served, after)
		}
		require.Equal(t, []string{subs[0].ID, subs[1].ID, subs[2].ID, subs[0].ID, subs[1].ID, subs[2].ID}, served)

		// Starting after the middle one wraps to the first after the last.
		claimed := b.claim(t, store.DeliveryClaimParams{Limit: 2, RotateAfter: subs[1].ID})
		require.Len(t, claimed, 2)
		require.ElementsMatch(t, []string{subs[2].ID, subs[0].ID}, []string{claimed[0].Delivery.SubscriptionID, claimed[1].Delivery.SubscriptionID})
	})

	t.Run("TiesByID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		ids := b.publishMany(t, 5, sub.ID, func(int) time.Time { return now })
		slices.Sort(ids)
		require.Equal(t, ids[:2], claimedIDs(b.claim(t, store.DeliveryClaimParams{Limit: 2})))
	})

	t.Run("TierOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])
		b.complete(t, now, retried(c, ownerA, now, now))

		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Tier: 0}), "it left tier 0")
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{Tier: 2}))
		c = b.claimOne(t, 1, ownerA, now, ids[0])
		require.Equal(t, 1, c.Delivery.Tier)
		require.Equal(t, 1, c.Delivery.AttemptCount)
		require.Equal(t, 2, c.Attempt, "Attempt is AttemptCount+1")
	})

	t.Run("EnabledSubscriptionsOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)

		sub.State, sub.DisabledReason = herald.SubscriptionDisabled, "paused"
		_, err := b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: sub, Now: now})
		require.NoError(t, err)
		require.Empty(t, b.claim(t, store.DeliveryClaimParams{}))
		next, err := b.store.DeliveryNextDue(b.ctx, &store.DeliveryNextDueParams{Tier: 0})
		require.NoError(t, err)
		require.Nil(t, next, "a disabled subscription's work is not due")
		b.requireState(t, herald.DeliveryPending, ids[0])

		// Re-enabled, its waiting deliveries are claimable again.
		sub.State, sub.DisabledReason = herald.SubscriptionEnabled, ""
		_, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: sub, Now: now})
		require.NoError(t, err)
		require.Equal(t, ids, claimedIDs(b.claim(t, store.DeliveryClaimParams{})))
	})

	t.Run("CarriesEverything", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		want := newSubscription()
		sub, err := b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{
			Subscription: want, Secret: "whsec_old", Now: now.Add(-2 * time.Hour),
		})
		require.NoError(t, err)
		// "old" expired before the claim; "mid" is in its grace period.
		require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: "whsec_mid", GraceUntil: now.Add(-time.Minute), Now: now.Add(-time.Hour),
		}))
		require.NoError(t, b.store.SubscriptionSecretRotate(b.ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: "whsec_new", GraceUntil: now.Add(time.Hour), Now: now.Add(-time.Second),
		}))
		ev := newEvent(func(e *herald.Event) { e.Key, e.Version = "k", ptr(int64(3)) })
		dID := herald.NewID(herald.PrefixDelivery)
		_, err = b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Now: now, Events: []store.EventInsert{
			{Event: ev, Deliveries: []store.DeliveryInsert{{ID: dID, SubscriptionID: sub.ID, NextAttemptAt: now}}},
		}})
		require.NoError(t, err)

		c := b.claimOne(t, 0, ownerA, now, dID)
		requireEventEqual(t, ev, c.Event)
		requireSubscriptionEqual(t, want, c.Subscription)
		require.Equal(t, dID, c.Delivery.ID)
		require.Equal(t, ev.ID, c.Delivery.EventID)
		require.Equal(t, sub.ID, c.Delivery.SubscriptionID)
		require.Equal(t, "k", c.Delivery.EventKey)
		require.Equal(t, ptr(int64(3)), c.Delivery.EventVersion)
		require.Zero(t, c.Delivery.AttemptCount)
		require.Equal(t, 1, c.Attempt)

		require.Len(t, c.Secrets, 2, "the expired secret is not offered for signing")
		require.Equal(t, "whsec_new", c.Secrets[0].Value, "newest first")
		require.Equal(t, "whsec_mid", c.Secrets[1].Value)
		for _, s := range c.Secrets {
			require.True(t, s.Active(now), s.Value)
		}
	})

	t.Run("LeasePerSubscription", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		slow := b.createSub(t, func(s *herald.Subscription) { s.TimeoutMS = 30_000 })
		fast := b.createSub(t, func(s *herald.Subscription) { s.TimeoutMS = 1_000 })
		dflt := b.createSub(t, func(s *herald.Subscription) { s.TimeoutMS = 0 }) // herald.DefaultTimeout
		_, ids := b.publish(t, now, slow.ID, fast.ID, dflt.ID)

		claimed := b.claim(t, store.DeliveryClaimParams{LeaseUntil: now.Add(10 * time.Second), LeaseMargin: 5 * time.Second})
		require.Len(t, claimed, 3)
		lease := map[string]time.Time{}
		for _, c := range claimed {
			lease[c.Delivery.ID] = c.LeaseUntil
		}
		// max(LeaseUntil, Now + timeout + margin).
		requireTimeEqual(t, now.Add(35*time.Second), lease[ids[0]], "30s timeout outlives LeaseUntil")
		requireTimeEqual(t, now.Add(10*time.Second), lease[ids[1]], "LeaseUntil covers a 1s timeout")
		requireTimeEqual(t, now.Add(herald.DefaultTimeout+5*time.Second), lease[ids[2]], "no timeout means the default")

		// The lease is what rescue honours: only the fast one's lease has
		// expired at Now+11s.
		n, err := b.store.DeliveryRescue(b.ctx, &store.DeliveryRescueParams{Now: now.Add(11 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.requireState(t, herald.DeliveryPending, ids[1])
		b.requireState(t, herald.DeliveryInFlight, ids[0], ids[2])
	})

	t.Run("FairnessBigBacklog", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		noisy, quiet := b.createSub(t), b.createSub(t)
		// 10,000 deliveries, all due an hour before the quiet one: a plain
		// FIFO claim would never reach it.
		b.publishMany(t, 10_000, noisy.ID, func(i int) time.Time {
			return now.Add(-time.Hour).Add(time.Duration(i) * time.Millisecond)
		})
		_, quietIDs := b.publish(t, now, quiet.ID)

		claimed := b.claim(t, store.DeliveryClaimParams{Limit: 10})
		require.Len(t, claimed, 10)
		require.Contains(t, claimedIDs(claimed), quietIDs[0])
		perSub := countBySubscription(claimed)
		require.Equal(t, 9, perSub[noisy.ID], "water-filling gives the rest to the backlog")
		require.Equal(t, 1, perSub[quiet.ID])
		requireClaimOrder(t, claimed)

		// The next claim keeps draining the backlog in order.
		next := b.claim(t, store.DeliveryClaimParams{Limit: 10})
		require.Len(t, next, 10)
		require.Equal(t, 10, countBySubscription(next)[noisy.ID])
		require.True(t, !claimed[8].Delivery.NextAttemptAt.After(*next[0].Delivery.NextAttemptAt))
	})

	t.Run("WaterFilling", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			due   []int // due deliveries per subscription
			limit int
		}{
			{due: []int{3, 10, 10}, limit: 12},
			{due: []int{1, 1, 1, 1, 1}, limit: 3},
			{due: []int{5, 5}, limit: 10},
			{due: []int{2, 100}, limit: 10},
			{due: []int{1, 2, 3, 50}, limit: 20},
			{due: []int{7, 7, 7}, limit: 100},
			{due: []int{4, 4, 4, 4}, limit: 6},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("due%v_limit%d", tc.due, tc.limit), func(t *testing.T) {
				t.Parallel()
				b := setup(t, newStore)
				due := map[string]int{}
				for i, n := range tc.due {
					sub := b.createSub(t)
					due[sub.ID] = n
					// Later subscriptions' work is older, so order of
					// creation does not decide the split.
					b.publishMany(t, n, sub.ID, func(j int) time.Time {
						return now.Add(-time.Duration(len(tc.due)-i) * time.Minute).Add(time.Duration(j) * time.Millisecond)
					})
					// Work that is not due yet never counts.
					b.publish(t, now.Add(time.Hour), sub.ID)
				}
				claimed := b.claim(t, store.DeliveryClaimParams{Limit: tc.limit})
				requireFair(t, due, countBySubscription(claimed), tc.limit)
				requireClaimOrder(t, claimed)
			})
		}
	})

	// The rule holds across kinds of subscription: a fifo or latest one is
	// one share like any other (its keys decide only which of its
	// deliveries it takes), and a throttled one counts with what its budget
	// lets it take; what one cannot use goes to the others.
	t.Run("WaterFillingMixed", func(t *testing.T) {
		t.Parallel()
		const (
			fifo   = herald.OrderingFIFO
			latest = herald.OrderingLatest
		)
		n := func(due int) waterSub { return waterSub{due: due} }
		cases := []struct {
			name  string
			subs  []waterSub
			limit int
		}{
			{"fifo+3none", []waterSub{{due: 50, ordering: fifo}, n(50), n(50), n(50)}, 12},
			{"fifo+10none", append([]waterSub{{due: 50, ordering: fifo}}, slices.Repeat([]waterSub{n(50)}, 10)...), 22},
			{"latest+fifo+2none", []waterSub{{due: 50, ordering: latest}, {due: 50, ordering: fifo}, n(50), n(50)}, 12},
			{"3fifo+none", []waterSub{{due: 50, ordering: fifo}, {due: 50, ordering: fifo}, {due: 50, ordering: latest}, n(50)}, 10},
			{"shortFifo", []waterSub{{due: 2, ordering: fifo}, n(50), n(50), {due: 50, ordering: latest}}, 14},
			{"fifoFewKeys", []waterSub{{due: 20, ordering: fifo, keys: 2}, {due: 20, ordering: latest, keys: 3}, n(50)}, 15},
			{"shortNone", []waterSub{n(1), {due: 50, ordering: fifo}, {due: 50, ordering: fifo}}, 9},
			{"rateNone", []waterSub{{due: 50, rateMax: 2}, {due: 50, ordering: fifo}, n(50)}, 12},
			{"rateFifo", []waterSub{{due: 50, ordering: fifo, rateMax: 3}, n(50), n(50), n(50)}, 16},
			{"rateLatest+shortNone", []waterSub{{due: 50, ordering: latest, rateMax: 1}, n(3), {due: 50, ordering: fifo}, n(50)}, 20},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s_limit%d", tc.name, tc.limit), func(t *testing.T) {
				t.Parallel()
				b := setup(t, newStore)
				due := map[string]int{}
				for i, ws := range tc.subs {
					sub := b.createSub(t, func(s *herald.Subscription) {
						s.Ordering, s.KeyIntervalMS = cmp.Or(ws.ordering, herald.OrderingNone), 0
						if ws.rateMax > 0 {
							s.RateLimit = &herald.RateLimit{Max: ws.rateMax, PerSeconds: 60}
						}
					})
					due[sub.ID] = ws.claimable()
					// Later subscriptions' work is older, so order of
					// creation does not decide the split.
					b.publishWater(t, sub.ID, ws, func(j int) time.Time {
						return now.Add(-time.Duration(len(tc.subs)-i) * time.Minute).Add(time.Duration(j) * time.Millisecond)
					})
				}
				claimed := b.claim(t, store.DeliveryClaimParams{Limit: tc.limit})
				requireFair(t, due, countBySubscription(claimed), tc.limit)
				requireClaimOrder(t, claimed)
			})
		}
	})

	t.Run("NextDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		nextDue := func(tier int) *time.Time {
			t.Helper()
			next, err := b.store.DeliveryNextDue(b.ctx, &store.DeliveryNextDueParams{Tier: tier})
			require.NoError(t, err)
			return next
		}
		require.Nil(t, nextDue(0), "nothing pending")

		sub := b.createSub(t)
		off := b.createSub(t, func(s *herald.Subscription) { s.State = herald.SubscriptionDisabled })
		b.publish(t, now.Add(-time.Hour), off.ID) // earliest, but its subscription is disabled
		_, inFlight := b.publish(t, now.Add(-time.Minute), sub.ID)
		b.claimOne(t, 0, ownerA, now, inFlight[0])
		b.publish(t, now.Add(3*time.Second), sub.ID)
		b.publish(t, now.Add(time.Minute), sub.ID)

		// The earliest pending one, even if in the future: workers sleep
		// until then.
		requireTimePtrEqual(t, ptr(now.Add(3*time.Second)), nextDue(0))
		require.Nil(t, nextDue(1))
	})
}

// waterSub is one subscription of a WaterFillingMixed case.
type waterSub struct {
	due      int             // due deliveries
	ordering herald.Ordering // "" is none
	// keys, for an ordered subscription, spreads its deliveries over this
	// many keys (0: one key each); a key yields one delivery per claim.
	keys int
	// rateMax > 0 rate-limits the subscription to rateMax starts a minute.
	rateMax int
}

// claimable is how many of its due deliveries a claim could take from ws
// alone.
func (ws waterSub) claimable() int {
	n := ws.due
	if ws.ordering != "" && ws.keys > 0 {
		n = min(n, ws.keys)
	}
	if ws.rateMax > 0 {
		n = min(n, ws.rateMax)
	}
	return n
}

// publishWater stores ws's due deliveries for subID in one call (keyed for
// an ordered subscription), delivery j due at due(j), and one that is not
// due yet (it never counts).
func (b *bundle) publishWater(t *testing.T, subID string, ws waterSub, due func(j int) time.Time) {
	t.Helper()
	events := make([]store.EventInsert, ws.due+1)
	for j := range events {
		at := due(j)
		if j == ws.due {
			at = now.Add(time.Hour)
		}
		ev := newEvent()
		switch {
		case ws.ordering == "":
		case j == ws.due:
			ev.Key = "later" // its own key: a newer version would supersede
		case ws.keys > 0:
			ev.Key = fmt.Sprintf("k%d", j%ws.keys)
		default:
			ev.Key = fmt.Sprintf("k%d", j)
		}
		events[j] = store.EventInsert{Event: ev, Deliveries: []store.DeliveryInsert{{
			ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: subID, NextAttemptAt: at,
		}}}
	}
	_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: events, Now: now})
	require.NoError(t, err)
}

func countBySubscription(claimed []*store.ClaimedDelivery) map[string]int {
	out := map[string]int{}
	for _, c := range claimed {
		out[c.Delivery.SubscriptionID]++
	}
	return out
}

// requireClaimOrder checks that a claim came back in next_attempt_at order.
func requireClaimOrder(t *testing.T, claimed []*store.ClaimedDelivery) {
	t.Helper()
	for i := 1; i < len(claimed); i++ {
		prev, cur := claimed[i-1].Delivery.NextAttemptAt, claimed[i].Delivery.NextAttemptAt
		require.NotNil(t, prev)
		require.NotNil(t, cur)
		require.False(t, cur.Before(*prev), "claim %d is earlier than claim %d", i, i-1)
	}
}

// requireFair checks the DeliveryClaimParams fairness rule as integer
// water-filling: the claim is as full as the work allows, nobody gets more
// than is due, and a subscription may get more than another (by more than
// the one delivery rounding allows) only if that other got all it had.
func requireFair(t *testing.T, due, got map[string]int, limit int) {
	t.Helper()
	total, want := 0, 0
	for id, n := range due {
		want += n
		require.LessOrEqual(t, got[id], n, "more than due for %s", id)
		total += got[id]
	}
	require.Equal(t, min(limit, want), total, "claim not as full as the work allows; got %v of %v", got, due)
	for a := range due {
		for c := range due {
			if got[a] > got[c]+1 {
				require.Equal(t, due[c], got[c], "%s got %d while %s got %d of its %d due (got %v of %v)",
					a, got[a], c, got[c], due[c], got, due)
			}
		}
	}
	k := len(due)
	share := (limit + k - 1) / k
	for a := range due {
		if got[a] > share {
			for c := range due {
				require.True(t, got[c] >= share || got[c] == due[c],
					"%s exceeded ceil(limit/k)=%d while %s was short (got %v of %v)", a, share, c, got, due)
			}
		}
	}
}
