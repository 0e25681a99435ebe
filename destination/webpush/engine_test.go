package webpushdest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

type engineHarness struct {
	store store.Store
	ing   *ingest.Ingester
}

// newEngine runs an ingester and an engine on a SQLite store, sending
// through a destination.Router with the webpush publisher registered, as
// herald serve does.
func newEngine(t *testing.T, vapid *VAPIDKey, tiers delivery.Tiers) *engineHarness {
	t.Helper()
	s := testdb.SQLite(t)
	sender := webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}})
	router := destination.NewRouter(sender)
	router.Register(herald.DestinationWebPush, New(Config{Sender: sender, Keys: staticKeys{vapid}, AllowHTTP: true}))
	fanout := ingest.NewFanout(s, nil)
	engine := delivery.New(delivery.Config{
		Store: s, Sender: router, Fanout: fanout, Tiers: tiers, Workers: 4,
		LeaseMargin: 2 * time.Second, PollInterval: 50 * time.Millisecond,
	})
	ing := ingest.New(ingest.Config{Store: s, Fanout: fanout, Tier0Delay: tiers[0], OnCommit: engine.Notify, Dispatcher: engine})
	ing.Start()
	engine.Start()
	t.Cleanup(func() {
		ing.Close()
		engine.Stop()
		router.Close()
	})
	return &engineHarness{store: s, ing: ing}
}

func (h *engineHarness) subscribe(t *testing.T, d herald.Destination, types ...string) *herald.Subscription {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub := &herald.Subscription{
		ID: herald.NewID(herald.PrefixSubscription), URL: d.Subscription.Endpoint, Method: http.MethodPost,
		Destination: d, EventTypes: types, Headers: map[string]string{}, Ordering: herald.OrderingNone,
		TimeoutMS: 5000, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now, Metadata: json.RawMessage(`{}`),
	}
	created, err := h.store.SubscriptionCreate(t.Context(), &store.SubscriptionCreateParams{Subscription: sub, Secret: webhook.NewSecret(), Now: now})
	require.NoError(t, err)
	require.Equal(t, d.Type, created.Dest().Type, "the store keeps the destination")
	return created
}

// finished waits for the subscription's one delivery to be delivered or
// dead.
func (h *engineHarness) finished(t *testing.T, subID string) *herald.Delivery {
	t.Helper()
	var out *herald.Delivery
	require.Eventually(t, func() bool {
		res, err := h.store.DeliveryList(t.Context(), &store.DeliveryListParams{SubscriptionID: subID, Limit: 10})
		if err != nil || len(res.Deliveries) != 1 || !res.Deliveries[0].State.Finished() {
			return false
		}
		out = res.Deliveries[0]
		return true
	}, 60*time.Second, 20*time.Millisecond)
	return out
}

// TestEngineOutcomes: through a real engine and store, a push service's
// 410 disables the subscription (with the herald.subscription.disabled
// alert), its 413 and a payload over the record dead-letter on the first
// attempt although later tiers remain, and a 201 delivers the event's
// body to the browser.
func TestEngineOutcomes(t *testing.T) {
	t.Parallel()
	vapid := newVAPIDKey(t)
	// Tiers long enough that a retry would show as a pending delivery.
	h := newEngine(t, vapid, delivery.Tiers{0, time.Hour, time.Hour})

	ok := newPushService(t, vapid)
	gone := newPushService(t, vapid)
	gone.answer(http.StatusGone, "push subscription has unsubscribed or expired", nil)
	big := newPushService(t, vapid)
	big.answer(http.StatusRequestEntityTooLarge, "payload too large", nil)
	local := newPushService(t, vapid)

	okSub := h.subscribe(t, ok.destination(), "order.*")
	goneSub := h.subscribe(t, gone.destination(), "order.*")
	bigSub := h.subscribe(t, big.destination(), "order.*")
	localSub := h.subscribe(t, local.destination(), "huge.*")
	alertSub := h.subscribe(t, ok.destination(), "herald.subscription.*")

	res, err := h.ing.PublishOne(t.Context(), &herald.Event{Type: "order.paid", Key: "order-42", Data: json.RawMessage(`{"id":42}`)})
	require.NoError(t, err)
	require.Equal(t, 3, res.DeliveryCount)

	d := h.finished(t, okSub.ID)
	require.Equal(t, herald.DeliveryDelivered, d.State)
	var env struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	got := ok.received()
	require.NotEmpty(t, got)
	require.NoError(t, got[0].err)
	require.NoError(t, json.Unmarshal(got[0].plain, &env), "%s", got[0].plain)
	require.Equal(t, "order.paid", env.Type)
	require.JSONEq(t, `{"id":42}`, string(env.Data))
	require.Equal(t, TopicOf("order-42"), got[0].header.Get("Topic"))

	d = h.finished(t, goneSub.ID)
	require.Equal(t, herald.DeliveryDead, d.State)
	require.Equal(t, herald.ErrorGone, d.LastError)
	require.Equal(t, 1, d.AttemptCount)
	cur, err := h.store.SubscriptionGet(t.Context(), goneSub.ID)
	require.NoError(t, err)
	require.Equal(t, herald.SubscriptionDisabled, cur.State)
	alert := h.finished(t, alertSub.ID)
	require.Equal(t, herald.DeliveryDelivered, alert.State)
	require.Eventually(t, func() bool {
		for _, r := range ok.received() {
			if bytes.Contains(r.plain, []byte(herald.EventTypeSubscriptionDisabled)) && bytes.Contains(r.plain, []byte(goneSub.ID)) {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the herald.subscription.disabled alert")

	d = h.finished(t, bigSub.ID)
	require.Equal(t, herald.DeliveryDead, d.State)
	require.Equal(t, herald.ErrorPayloadTooLarge, d.LastError)
	require.Equal(t, 1, d.AttemptCount, "413 is not retried")
	cur, err = h.store.SubscriptionGet(t.Context(), bigSub.ID)
	require.NoError(t, err)
	require.Equal(t, herald.SubscriptionEnabled, cur.State)

	// An event whose envelope is over 3993 bytes never leaves herald.
	huge, err := json.Marshal(map[string]string{"pad": string(bytes.Repeat([]byte("x"), MaxPlaintext))})
	require.NoError(t, err)
	_, err = h.ing.PublishOne(t.Context(), &herald.Event{Type: "huge.one", Data: huge})
	require.NoError(t, err)
	d = h.finished(t, localSub.ID)
	require.Equal(t, herald.DeliveryDead, d.State)
	require.Equal(t, herald.ErrorPayloadTooLarge, d.LastError)
	require.Equal(t, 1, d.AttemptCount)
	require.Contains(t, d.LastMessage, "bytes")
	require.Empty(t, local.received())
}

// TestEngineRetryAfter: a push service's 429 with Retry-After pauses the
// subscription for that long, as a webhook receiver's does, and the
// message is delivered on the next attempt.
func TestEngineRetryAfter(t *testing.T) {
	t.Parallel()
	vapid := newVAPIDKey(t)
	h := newEngine(t, vapid, delivery.Tiers{0, 10 * time.Millisecond, 10 * time.Millisecond})
	ps := newPushService(t, vapid)
	ps.answer(http.StatusTooManyRequests, "slow down", http.Header{"Retry-After": {"1"}})
	sub := h.subscribe(t, ps.destination(), "order.*")
	_, err := h.ing.PublishOne(t.Context(), &herald.Event{Type: "order.paid", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(ps.received()) == 1 }, 30*time.Second, 10*time.Millisecond)
	first := time.Now()
	ps.answer(http.StatusCreated, "", nil)
	d := h.finished(t, sub.ID)
	require.Equal(t, herald.DeliveryDelivered, d.State)
	require.Equal(t, 2, d.AttemptCount)
	require.Len(t, ps.received(), 2)
	// Not before Retry-After (measured from after the first answer, so
	// the bound is loose, never tight).
	require.GreaterOrEqual(t, time.Since(first), 900*time.Millisecond)
}
