package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// testHealth covers subscription health (store/health.go) and the
// auto-disable rule's storage.
func testHealth(t *testing.T, newStore NewStoreFunc) {
	t.Run("StreakWithOutcomes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		_, ids := b.publish(t, now, sub.ID)
		c := b.claimOne(t, 0, ownerA, now, ids[0])

		// The health update rides in the completion's transaction.
		first := now.Add(time.Second)
		res, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
			Outcomes: []store.DeliveryOutcome{retried(c, ownerA, first, now.Add(time.Minute))},
			Health:   []store.HealthUpdate{{SubscriptionID: sub.ID, Attempts: 1, Failures: 1, FailingSince: first}},
			Now:      first,
		})
		require.NoError(t, err)
		require.Equal(t, 1, res.Applied)
		require.Len(t, res.Health, 1)
		require.Equal(t, sub.ID, res.Health[0].SubscriptionID)
		require.Equal(t, 1, res.Health[0].ConsecutiveFailures)
		requireTimeEqual(t, first, res.Health[0].FailingSince)

		// More failures extend the streak; its start stays.
		st := b.health(t, first.Add(time.Hour), store.HealthUpdate{SubscriptionID: sub.ID, Attempts: 3, Failures: 3,
			FailingSince: first.Add(time.Hour)})
		require.Equal(t, 4, st.ConsecutiveFailures)
		requireTimeEqual(t, first, st.FailingSince)

		h := b.healthGet(t, sub.ID, first.Add(time.Hour))
		require.Equal(t, 4, h.ConsecutiveFailures)
		requireTimePtrEqual(t, &first, h.FailingSince)
		require.Equal(t, int64(4), h.Attempts24h)
		require.NotNil(t, h.SuccessRate24h)
		require.InDelta(t, 0, *h.SuccessRate24h, 1e-9)

		// A batch with a success replaces the streak with what followed
		// its last success.
		later := first.Add(2 * time.Hour)
		st = b.health(t, later, store.HealthUpdate{SubscriptionID: sub.ID, Attempts: 3, Successes: 1, Failures: 2,
			FailingSince: later})
		require.Equal(t, 2, st.ConsecutiveFailures)
		requireTimeEqual(t, later, st.FailingSince)
		st = b.health(t, later, store.HealthUpdate{SubscriptionID: sub.ID, Attempts: 1, Successes: 1})
		require.Zero(t, st.ConsecutiveFailures)
		require.True(t, st.FailingSince.IsZero())

		h = b.healthGet(t, sub.ID, later)
		require.Zero(t, h.ConsecutiveFailures)
		require.Nil(t, h.FailingSince)
		require.Equal(t, int64(8), h.Attempts24h)
		require.InDelta(t, 2.0/8, *h.SuccessRate24h, 1e-9)
	})

	t.Run("NeverAttempted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		h := b.healthGet(t, sub.ID, now)
		require.Equal(t, herald.SubscriptionHealth{}, *h)

		_, err := b.store.SubscriptionHealthGet(b.ctx, &store.SubscriptionHealthGetParams{ID: "sub_missing", Now: now})
		require.ErrorIs(t, err, herald.ErrNotFound)
	})

	t.Run("DayWindows", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		day := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
		// Yesterday 10 attempts, all good; today 10, all failed.
		b.health(t, day.Add(-time.Hour), store.HealthUpdate{SubscriptionID: sub.ID, Attempts: 10, Successes: 10})
		b.health(t, day.Add(time.Hour), store.HealthUpdate{SubscriptionID: sub.ID, Attempts: 10, Failures: 10,
			FailingSince: day.Add(time.Hour)})

		// At 06:00, three quarters of yesterday is within 24 h.
		h := b.healthGet(t, sub.ID, day.Add(6*time.Hour))
		require.Equal(t, int64(18), h.Attempts24h) // 10 + 7.5, rounded
		require.InDelta(t, 7.5/17.5, *h.SuccessRate24h, 1e-9)
		// Two days on, only today's counts weigh (fully, then not at all).
		h = b.healthGet(t, sub.ID, day.Add(36*time.Hour))
		require.Equal(t, int64(5), h.Attempts24h)
		require.InDelta(t, 0, *h.SuccessRate24h, 1e-9)
		h = b.healthGet(t, sub.ID, day.Add(72*time.Hour))
		require.Zero(t, h.Attempts24h)
		require.Nil(t, h.SuccessRate24h)
		require.Equal(t, 10, h.ConsecutiveFailures, "the streak does not age out")

		// A new day rolls the counts: today's move to the previous day.
		b.health(t, day.Add(25*time.Hour), store.HealthUpdate{SubscriptionID: sub.ID, Attempts: 2, Successes: 2})
		h = b.healthGet(t, sub.ID, day.Add(36*time.Hour))
		require.Equal(t, int64(7), h.Attempts24h) // 2 + 10/2
		require.InDelta(t, 2.0/7, *h.SuccessRate24h, 1e-9)
	})

	t.Run("RacingCompletions", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		const workers, each = 8, 5
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					at := now.Add(time.Duration(w*each+i) * time.Second)
					_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
						Health: []store.HealthUpdate{{SubscriptionID: sub.ID, Attempts: 1, Failures: 1, FailingSince: at}},
						Now:    at,
					})
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		h := b.healthGet(t, sub.ID, now.Add(time.Minute))
		require.Equal(t, workers*each, h.ConsecutiveFailures, "every racing failure counts")
		require.Equal(t, int64(workers*each), h.Attempts24h)
		require.NotNil(t, h.FailingSince)
	})

	t.Run("RacingCompletionsTwoSubscriptions", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		x, y := b.createSub(t), b.createSub(t)
		// Each batch names both subscriptions, in opposite orders: the
		// backend must lock them in one order or two batches can deadlock
		// (a window this test does not hit on every run).
		const rounds = 20
		var wg sync.WaitGroup
		errs := make(chan error, 2*rounds)
		for _, order := range [][]string{{x.ID, y.ID}, {y.ID, x.ID}} {
			wg.Go(func() {
				for i := range rounds {
					at := now.Add(time.Duration(i) * time.Second)
					_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
						Health: []store.HealthUpdate{
							{SubscriptionID: order[0], Attempts: 1, Failures: 1, FailingSince: at},
							{SubscriptionID: order[1], Attempts: 1, Failures: 1, FailingSince: at},
						},
						Now: at,
					})
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, 2*rounds, b.healthGet(t, x.ID, now).ConsecutiveFailures)
		require.Equal(t, 2*rounds, b.healthGet(t, y.ID, now).ConsecutiveFailures)
	})

	t.Run("ConditionalDisableAndReenable", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		sub := b.createSub(t)
		b.health(t, now, store.HealthUpdate{SubscriptionID: sub.ID, Attempts: 3, Failures: 3, FailingSince: now})

		disable := func(minFailures int) *herald.Subscription {
			t.Helper()
			_, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{
				DisableSubscriptions: []store.SubscriptionDisable{{ID: sub.ID, Reason: herald.DisabledReasonFailing, MinFailures: minFailures}},
				Now:                  now.Add(time.Minute),
			})
			require.NoError(t, err)
			got, err := b.store.SubscriptionGet(b.ctx, sub.ID)
			require.NoError(t, err)
			return got
		}
		require.Equal(t, herald.SubscriptionEnabled, disable(4).State, "the streak is shorter than the condition")
		before := b.version(t)
		got := disable(3)
		require.Equal(t, herald.SubscriptionDisabled, got.State)
		require.Equal(t, herald.DisabledReasonFailing, got.DisabledReason)
		require.Greater(t, b.version(t), before)

		// An update that keeps it disabled keeps the streak.
		got.Description = "still off"
		got, err := b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: got, Now: now.Add(2 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, 3, b.healthGet(t, sub.ID, now).ConsecutiveFailures)

		// Re-enabling starts the streak afresh, so a disable decided from
		// the old streak does not apply.
		got.State, got.DisabledReason = herald.SubscriptionEnabled, ""
		_, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: got, Now: now.Add(3 * time.Minute)})
		require.NoError(t, err)
		h := b.healthGet(t, sub.ID, now.Add(3*time.Minute))
		require.Zero(t, h.ConsecutiveFailures)
		require.Nil(t, h.FailingSince)
		require.Equal(t, int64(3), h.Attempts24h, "the day counts stay")
		require.Equal(t, herald.SubscriptionEnabled, disable(3).State)
	})

	t.Run("AutoDisableRule", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		def := b.createSub(t)
		require.Nil(t, def.AutoDisable, "nil: the server's defaults")
		never := b.createSub(t, func(s *herald.Subscription) { s.AutoDisable = &herald.AutoDisable{} })
		require.NotNil(t, never.AutoDisable)
		require.True(t, never.AutoDisable.Never())
		own := b.createSub(t, func(s *herald.Subscription) {
			s.AutoDisable = &herald.AutoDisable{ConsecutiveFailures: 7, MinDurationS: 3600}
		})
		require.Equal(t, &herald.AutoDisable{ConsecutiveFailures: 7, MinDurationS: 3600}, own.AutoDisable)

		got, err := b.store.SubscriptionGet(b.ctx, own.ID)
		require.NoError(t, err)
		require.Equal(t, own.AutoDisable, got.AutoDisable)
		got.AutoDisable = nil
		got, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: got, Now: now})
		require.NoError(t, err)
		require.Nil(t, got.AutoDisable)
		got.AutoDisable = &herald.AutoDisable{ConsecutiveFailures: 2}
		got, err = b.store.SubscriptionUpdate(b.ctx, &store.SubscriptionUpdateParams{Subscription: got, Now: now})
		require.NoError(t, err)
		require.Equal(t, &herald.AutoDisable{ConsecutiveFailures: 2}, got.AutoDisable)

		all, err := b.store.SubscriptionListAll(b.ctx)
		require.NoError(t, err)
		rules := map[string]*herald.AutoDisable{}
		for _, s := range all.Subscriptions {
			rules[s.ID] = s.AutoDisable
		}
		require.Nil(t, rules[def.ID])
		require.Equal(t, &herald.AutoDisable{}, rules[never.ID])
		require.Equal(t, &herald.AutoDisable{ConsecutiveFailures: 2}, rules[own.ID])
	})
}

// health applies one health update alone and returns the streak it left.
func (b *bundle) health(t *testing.T, at time.Time, u store.HealthUpdate) store.HealthStreak {
	t.Helper()
	res, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{Health: []store.HealthUpdate{u}, Now: at})
	require.NoError(t, err)
	require.Len(t, res.Health, 1)
	return res.Health[0]
}

func (b *bundle) healthGet(t *testing.T, id string, at time.Time) *herald.SubscriptionHealth {
	t.Helper()
	h, err := b.store.SubscriptionHealthGet(b.ctx, &store.SubscriptionHealthGetParams{ID: id, Now: at})
	require.NoError(t, err)
	return h
}
