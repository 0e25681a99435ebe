package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// TestAutoDisableFailing: a subscription whose endpoint keeps failing is
// disabled with reason failing once its streak has both the rule's count
// and its duration — not on the count alone — and
// herald.subscription.disabled says so; its pending retries stay pending,
// and re-enabling it resets the streak and delivers them. The engine's
// clock is moved by hand, so the retry tiers and the rule's hour pass at
// once.
func TestAutoDisableFailing(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		var offset atomic.Int64
		// The clock moves an hour and a half below; started within two
		// hours of a UTC midnight it would cross it, and the 24-hour
		// success rate checked at the end would weigh the previous day's
		// attempts (store.HealthEstimate) instead of being exactly 1/4. It
		// then starts just after that midnight.
		start := time.Now()
		if midnight := start.Truncate(24 * time.Hour).Add(24 * time.Hour); midnight.Sub(start) < 2*time.Hour {
			offset.Store(int64(midnight.Add(time.Minute).Sub(start)))
		}
		clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		advance := func(d time.Duration) { offset.Add(int64(d)) }

		var failing atomic.Bool
		failing.Store(true)
		var received atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/watched" {
				received.Add(1)
			}
			if failing.Load() {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)

		const retry = 30 * time.Minute
		tiers := delivery.Tiers{0, retry, retry, retry, retry}
		fanout := ingest.NewFanout(s, nil)
		engine := delivery.New(delivery.Config{
			Store: s, Fanout: fanout, Tiers: tiers, Workers: 4, LeaseMargin: 2 * time.Second,
			Sender:       webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
			PollInterval: 20 * time.Millisecond, RebalanceInterval: 50 * time.Millisecond, RescueInterval: time.Hour,
			// The default rule: 2 failures over at least an hour.
			AutoDisable: &herald.AutoDisable{ConsecutiveFailures: 2, MinDurationS: 3600},
			Now:         clock,
		})
		ing := ingest.New(ingest.Config{Store: s, Fanout: fanout, OnCommit: engine.Notify, Dispatcher: engine})
		ing.Start()
		engine.Start()
		t.Cleanup(func() {
			ing.Close()
			engine.Stop()
		})

		secret := webhook.NewSecret()
		sub := createSub(t, s, srv.URL+"/watched", time.Second, []string{"health.*"}, secret)
		// The alert receiver does not check signatures: their timestamps
		// follow the moved clock.
		var alertMu sync.Mutex
		var alertBodies [][]byte
		alertSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			alertMu.Lock()
			alertBodies = append(alertBodies, b)
			alertMu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(alertSrv.Close)
		alertSub := createSub(t, s, alertSrv.URL, time.Second, []string{herald.EventTypeSubscriptionDisabled}, secret)
		// A subscription that never auto-disables, on the same failing
		// endpoint.
		never := createSub(t, s, srv.URL, time.Second, []string{"health.*"}, secret)
		never.AutoDisable = &herald.AutoDisable{}
		_, err := s.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: never, Now: time.Now()})
		require.NoError(t, err)
		require.NoError(t, fanout.Refresh(ctx))

		health := func(id string) *herald.SubscriptionHealth {
			h, err := s.SubscriptionHealthGet(ctx, &store.SubscriptionHealthGetParams{ID: id, Now: clock()})
			require.NoError(t, err)
			return h
		}
		waitStreak := func(id string, n int) {
			t.Helper()
			require.Eventually(t, func() bool { return health(id).ConsecutiveFailures == n }, 20*time.Second, 10*time.Millisecond)
		}
		state := func(id string) *herald.Subscription {
			cur, err := s.SubscriptionGet(ctx, id)
			require.NoError(t, err)
			return cur
		}

		// An event fails its first attempt: a streak of 1, under the count.
		_, err = ing.PublishOne(ctx, &herald.Event{Type: "health.check", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		// Both subscriptions fail each step before the clock moves on: a
		// retry of never that had not run yet when the clock jumps would
		// be scheduled past the test's last step.
		waitStreak(sub.ID, 1)
		waitStreak(never.ID, 1)
		require.Equal(t, herald.SubscriptionEnabled, state(sub.ID).State)

		// Half an hour on, its retry fails: the count is reached, but the
		// streak is 30 minutes old, under the hour.
		advance(retry)
		waitStreak(sub.ID, 2)
		waitStreak(never.ID, 2)
		require.Equal(t, herald.SubscriptionEnabled, state(sub.ID).State, "the count alone does not disable")

		// Another half hour: the third attempt fails an hour after the
		// first, and the subscription is disabled.
		advance(retry)
		waitStreak(sub.ID, 3)
		// The disable follows the completion that recorded the streak.
		require.Eventually(t, func() bool { return state(sub.ID).State == herald.SubscriptionDisabled },
			20*time.Second, 10*time.Millisecond)
		cur := state(sub.ID)
		require.Equal(t, herald.DisabledReasonFailing, cur.DisabledReason)
		h := health(sub.ID)
		require.NotNil(t, h.FailingSince)
		require.NotNil(t, h.SuccessRate24h)
		require.InDelta(t, 0, *h.SuccessRate24h, 1e-9)
		require.Equal(t, herald.SubscriptionEnabled, state(never.ID).State, "auto_disable null never disables")
		waitStreak(never.ID, 3)

		// One alert, saying why.
		finished(t, s, alertSub.ID, 1)
		alertMu.Lock()
		require.Len(t, alertBodies, 1)
		for _, b := range alertBodies {
			var ev struct {
				Type string `json:"type"`
				Data struct {
					SubscriptionID      string `json:"subscription_id"`
					Reason              string `json:"reason"`
					ConsecutiveFailures int    `json:"consecutive_failures"`
					Threshold           int    `json:"threshold"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(b, &ev))
			require.Equal(t, herald.EventTypeSubscriptionDisabled, ev.Type)
			require.Equal(t, sub.ID, ev.Data.SubscriptionID)
			require.Equal(t, herald.DisabledReasonFailing, ev.Data.Reason)
			require.Equal(t, 3, ev.Data.ConsecutiveFailures)
			require.Equal(t, 2, ev.Data.Threshold)
		}
		alertMu.Unlock()

		// Its retry stays pending while it is disabled: due, but held.
		list, err := s.DeliveryList(ctx, &store.DeliveryListParams{SubscriptionID: sub.ID, Limit: 10})
		require.NoError(t, err)
		require.Len(t, list.Deliveries, 1)
		for _, d := range list.Deliveries {
			require.Equal(t, herald.DeliveryPending, d.State)
			require.Equal(t, 3, d.AttemptCount)
		}
		advance(retry)
		st, err := s.StatsGet(ctx, &store.StatsGetParams{Tiers: len(tiers), Now: clock()})
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Tiers[3].Held, "a disabled subscription's retry is held, not attempted")
		require.Equal(t, int64(3), received.Load(), "nothing was sent to it while disabled")

		// Re-enabled (the endpoint fixed), the streak starts afresh and
		// the held retry is delivered.
		failing.Store(false)
		cur.State, cur.DisabledReason = herald.SubscriptionEnabled, ""
		_, err = s.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: cur, Now: clock()})
		require.NoError(t, err)
		require.Zero(t, health(sub.ID).ConsecutiveFailures)
		engine.Notify()
		got := finished(t, s, sub.ID, 1)
		for _, d := range got {
			require.Equal(t, herald.DeliveryDelivered, d.State)
			require.Equal(t, 4, d.AttemptCount)
		}
		h = health(sub.ID)
		require.Zero(t, h.ConsecutiveFailures)
		require.Nil(t, h.FailingSince)
		require.InDelta(t, 1.0/4, *h.SuccessRate24h, 1e-9)
		require.Equal(t, herald.SubscriptionEnabled, state(sub.ID).State)
	})
}
