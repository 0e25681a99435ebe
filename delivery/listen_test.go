package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

// On PostgreSQL, work published on one node wakes an idle engine on another
// through LISTEN/NOTIFY (wired as serve does: onWork → Engine.Notify), long
// before its poll interval.
func TestListenWakesIdleEngine(t *testing.T) {
	t.Parallel()
	schema := testdb.PostgresSchema(t)
	publisher, worker := testdb.OpenPostgres(t, schema), testdb.OpenPostgres(t, schema)

	got := make(chan string, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("webhook-id")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(recv.Close)
	now := time.Now().UTC()
	sub, err := publisher.SubscriptionCreate(t.Context(), &store.SubscriptionCreateParams{
		Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), URL: recv.URL, Method: "POST",
			Ordering: herald.OrderingNone, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
		},
		Secret: "whsec_" + herald.NewID(""), Now: now,
	})
	require.NoError(t, err)

	// The worker node never polls in this test's lifetime and never
	// rebalances: only a wake-up can make it claim.
	engine := delivery.New(delivery.Config{
		Store:             worker,
		Sender:            webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
		Tiers:             delivery.Tiers{0},
		Workers:           4,
		PollInterval:      time.Hour,
		RebalanceInterval: time.Hour,
		RescueInterval:    time.Hour,
	})
	engine.Start()
	t.Cleanup(engine.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = worker.(store.Notifier).Listen(ctx, func(uint64) {
			engine.Notify()
			select {
			case listening <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not start")
	}

	// Publish on the other node (no engine there).
	ing := ingest.New(ingest.Config{Store: publisher})
	res, err := ing.PublishMany(t.Context(), []*herald.Event{{Type: "order.created", Data: json.RawMessage(`{"n":1}`)}})
	require.NoError(t, err)
	require.Equal(t, 1, res[0].DeliveryCount)
	select {
	case id := <-got:
		list, err := publisher.DeliveryList(t.Context(), &store.DeliveryListParams{SubscriptionID: sub.ID})
		require.NoError(t, err)
		require.Len(t, list.Deliveries, 1)
		require.Equal(t, list.Deliveries[0].ID, id)
	case <-time.After(10 * time.Second):
		t.Fatal("the idle engine was not woken")
	}
}
