package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// A restart with fewer --tiers moves the deliveries waiting in the removed
// tiers to the last configured one, says so in the log, and delivers them
// (issue 10, item 6: one stayed pending in tier 2 for good).
func TestRestartWithFewerTiers(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var got atomic.Int64
			recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
			t.Cleanup(recv.Close)
			onStore := storeArgs(t, backend)
			start := func(tiers string, hold bool, logs *syncBuffer) *heraldNode {
				t.Helper()
				c, err := loadConfig(t, append([]string{"--dev", "--api-token", "tiers-token", "--listen", "127.0.0.1:0",
					"--tiers", tiers, "--poll-interval", "50ms"}, onStore...))
				require.NoError(t, err)
				c.holdDelivery = hold
				n, err := startHeraldNode(ctx, c, slog.New(slog.NewTextHandler(logs, nil)))
				require.NoError(t, err)
				return n
			}

			// Four tiers, delivery held: fail a delivery up to tier 3.
			n := start("0s,1h,1h,1h", true, &syncBuffer{})
			now := time.Now().UTC().Truncate(time.Millisecond)
			_, err := n.store.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{
				Subscription: &herald.Subscription{
					ID: herald.NewID(herald.PrefixSubscription), URL: recv.URL, Method: http.MethodPost,
					Ordering: herald.OrderingNone, TimeoutMS: 5000, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
				},
				Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Now: now,
			})
			require.NoError(t, err)
			res, err := n.ingest.PublishOne(ctx, &herald.Event{Type: "tiers.shrank", Data: json.RawMessage(`{}`)})
			require.NoError(t, err)
			require.Equal(t, 1, res.DeliveryCount)
			for tier := 0; tier < 3; tier++ {
				claimed, err := n.store.DeliveryClaim(ctx, &store.DeliveryClaimParams{
					Tier: tier, Limit: 10, Now: time.Now(), LeaseOwner: "test", LeaseUntil: time.Now().Add(time.Minute),
				})
				require.NoError(t, err)
				require.Len(t, claimed, 1)
				due := time.Now().Add(-time.Second)
				_, err = n.store.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: time.Now(), Outcomes: []store.DeliveryOutcome{{
					DeliveryID: claimed[0].Delivery.ID, LeaseOwner: "test", State: herald.DeliveryPending, Tier: tier + 1, NextAttemptAt: &due,
					Attempt: herald.Attempt{N: tier + 1, At: time.Now(), Status: 500, Error: herald.ErrorHTTPStatus, Tier: tier},
				}}})
				require.NoError(t, err)
			}
			n.stop()

			// Restarted with two tiers: moved to tier 1 on start, logged,
			// then claimed and delivered from there.
			logs := &syncBuffer{}
			n = start("0s,1h", false, logs)
			t.Cleanup(n.stop)
			require.Contains(t, logs.String(), "from_tier=3 to_tier=1 count=1")
			require.Eventually(t, func() bool { return got.Load() == 1 }, 20*time.Second, 10*time.Millisecond)
			require.Eventually(t, func() bool {
				ev, err := n.store.EventGet(ctx, &store.EventGetParams{ID: res.ID})
				require.NoError(t, err)
				return ev.Deliveries[0].State == herald.DeliveryDelivered
			}, 20*time.Second, 10*time.Millisecond)
			d, err := n.store.DeliveryGet(ctx, mustDeliveryID(t, n.store, res.ID))
			require.NoError(t, err)
			require.Len(t, d.Attempts, 4)
			require.Equal(t, 1, d.Attempts[3].Tier, "attempted from the last configured tier")
		})
	}
}

func mustDeliveryID(t *testing.T, s store.Store, eventID string) string {
	t.Helper()
	ev, err := s.EventGet(context.Background(), &store.EventGetParams{ID: eventID})
	require.NoError(t, err)
	require.Len(t, ev.Deliveries, 1)
	return ev.Deliveries[0].ID
}
