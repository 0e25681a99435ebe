package listendest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/client"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination"
	listendest "github.com/heraldhq/herald/destination/listen"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// serveHub serves hub's listeners at the API's path, as httpapi does
// after authenticating.
func serveHub(t *testing.T, hub *listendest.Hub) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/subscriptions/{id}/listen", func(w http.ResponseWriter, r *http.Request) {
		_ = hub.Serve(w, r, r.PathValue("id"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// localAnswer is what the test's "local receiver" answers a request,
// chosen by the event type's first word: ok 200, fail 500, gone 410, slow
// too late, refused no answer at all.
func localAnswer(ctx context.Context, r *client.ListenRequest) *client.ListenResponse {
	switch strings.SplitN(r.EventType, ".", 2)[0] {
	case "fail":
		return &client.ListenResponse{Status: 500, Body: "local receiver broke", Headers: map[string]string{"Retry-After": "1"}}
	case "gone":
		return &client.ListenResponse{Status: 410}
	case "busy":
		return &client.ListenResponse{Status: 503, Headers: map[string]string{"Retry-After": "7"}}
	case "slow":
		<-ctx.Done()
		return &client.ListenResponse{Status: 200}
	case "refused":
		return &client.ListenResponse{Error: "dial tcp 127.0.0.1:3000: connect: connection refused"}
	}
	return &client.ListenResponse{Status: 200, Body: "thanks", Headers: map[string]string{"X-Local": "yes", "Authorization": "Bearer local-secret"}}
}

// listener connects a listener of sub that answers with answer and
// records every request; it stops at the test's end.
type listener struct {
	mu   sync.Mutex
	reqs []*client.ListenRequest
	done chan error
}

func connect(t *testing.T, srv *httptest.Server, subID string, answer func(context.Context, *client.ListenRequest) *client.ListenResponse) *listener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sess, err := client.New(srv.URL, "").Listen(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, subID, sess.SubscriptionID)
	require.Equal(t, herald.ResponseExcerptLimit, sess.MaxBodyBytes)
	l := &listener{done: make(chan error, 1)}
	go func() {
		l.done <- sess.Serve(ctx, func(ctx context.Context, r *client.ListenRequest) *client.ListenResponse {
			l.mu.Lock()
			l.reqs = append(l.reqs, r)
			l.mu.Unlock()
			return answer(ctx, r)
		})
	}()
	t.Cleanup(cancel)
	return l
}

func (l *listener) requests() []*client.ListenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*client.ListenRequest(nil), l.reqs...)
}

func newRequest(subID, eventType string, timeout time.Duration) *webhook.Request {
	return &webhook.Request{
		Body: []byte(`{"type":"` + eventType + `","data":{}}`), MsgID: herald.NewID(herald.PrefixDelivery),
		Secrets: []string{webhook.NewSecret()}, Attempt: 1, EventType: eventType, SubscriptionID: subID,
		Timeout: timeout, EventID: herald.NewID(herald.PrefixEvent),
		Destination: herald.Destination{Type: herald.DestinationListen},
	}
}

// Each local answer is classified as the same answer of a webhook would
// be; the request the listener gets is the signed webhook request.
func TestSendClassifiesLikeAWebhook(t *testing.T) {
	t.Parallel()
	hub := listendest.New(listendest.Config{})
	t.Cleanup(hub.Close)
	srv := serveHub(t, hub)
	subID := herald.NewID(herald.PrefixSubscription)

	// No listener: a transient connection failure, with what would have
	// been sent recorded.
	res := hub.Send(context.Background(), newRequest(subID, "ok.none", time.Second))
	require.False(t, res.Success)
	require.False(t, res.Permanent)
	require.Equal(t, herald.ErrorConnection, res.Class)
	require.Contains(t, res.Message, "no listener connected")
	require.Contains(t, res.Message, subID)
	require.Equal(t, "v1,"+herald.MaskedCredential, res.RequestHeaders["webhook-signature"])

	l := connect(t, srv, subID, localAnswer)
	require.True(t, hub.Connected(subID))

	req := newRequest(subID, "ok.created", time.Second)
	res = hub.Send(context.Background(), req)
	require.True(t, res.Success, "%+v", res)
	require.Equal(t, 200, res.Status)
	require.Equal(t, "thanks", res.Excerpt)
	require.Equal(t, "yes", res.ResponseHeaders["x-local"])
	require.Equal(t, herald.MaskedCredential, res.ResponseHeaders["authorization"], "credentials are redacted as for webhooks")
	require.Equal(t, req.MsgID, res.RequestHeaders["webhook-id"])
	got := l.requests()[0]
	require.Equal(t, http.MethodPost, got.Method)
	require.Equal(t, req.Body, got.Body)
	require.Equal(t, req.MsgID, got.DeliveryID)
	require.Equal(t, req.EventID, got.EventID)
	require.Equal(t, time.Second, got.Timeout)
	h := http.Header{}
	for k, v := range got.Headers {
		h.Set(k, v)
	}
	require.NoError(t, webhook.Verify(req.Secrets, h, got.Body, time.Now(), time.Minute), "signed as a webhook: %v", got.Headers)
	require.Equal(t, "ok.created", h.Get("Herald-Event-Type"))
	require.Equal(t, subID, h.Get("Herald-Subscription-Id"))
	require.Equal(t, "1", h.Get("Herald-Attempt"))
	require.Equal(t, "application/json", h.Get("Content-Type"))

	for _, c := range []struct {
		typ        string
		class      herald.ErrorClass
		status     int
		message    string
		retryAfter time.Duration
	}{
		{"fail.x", herald.ErrorHTTPStatus, 500, "500 Internal Server Error", 0},
		{"gone.x", herald.ErrorGone, 410, "410 Gone", 0},
		{"busy.x", herald.ErrorHTTPStatus, 503, "503 Service Unavailable", 7 * time.Second},
		{"slow.x", herald.ErrorTimeout, 0, "did not answer within 300ms", 0},
		{"refused.x", herald.ErrorConnection, 0, "connection refused", 0},
	} {
		res := hub.Send(context.Background(), newRequest(subID, c.typ, 300*time.Millisecond))
		require.False(t, res.Success, c.typ)
		require.False(t, res.Permanent, c.typ)
		require.Equal(t, c.class, res.Class, "%s: %s", c.typ, res.Message)
		require.Equal(t, c.status, res.Status, c.typ)
		require.Contains(t, res.Message, c.message, c.typ)
		require.Equal(t, c.retryAfter, res.RetryAfter, c.typ)
		require.NotEmpty(t, res.RequestHeaders, c.typ)
	}
	res = hub.Send(context.Background(), newRequest(subID, "fail.y", time.Second))
	require.Equal(t, "local receiver broke", res.Excerpt)

	// A request that cannot be signed is not sent.
	bad := newRequest(subID, "ok.unsigned", time.Second)
	bad.Secrets = nil
	n := len(l.requests())
	res = hub.Send(context.Background(), bad)
	require.Equal(t, herald.ErrorInvalidRequest, res.Class)
	require.Len(t, l.requests(), n)
}

// A second listener of a subscription replaces the first, which is told
// so (close code 4001) and stops; a listener that stops answering pings
// is dropped; a frame above the limit ends the session; Close ends them
// all.
func TestSessions(t *testing.T) {
	t.Parallel()
	hub := listendest.New(listendest.Config{PingInterval: 50 * time.Millisecond, PongWait: 400 * time.Millisecond})
	t.Cleanup(hub.Close)
	srv := serveHub(t, hub)
	subID := herald.NewID(herald.PrefixSubscription)

	first := connect(t, srv, subID, localAnswer)
	second := connect(t, srv, subID, localAnswer)
	select {
	case err := <-first.done:
		var closed *client.ListenClosedError
		require.ErrorAs(t, err, &closed)
		require.Equal(t, client.ListenCloseReplaced, closed.Code)
		require.Equal(t, listendest.CloseReplaced, closed.Code)
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced listener was not closed")
	}
	res := hub.Send(context.Background(), newRequest(subID, "ok.after", time.Second))
	require.True(t, res.Success, res.Message)
	require.Len(t, second.requests(), 1)
	require.Empty(t, first.requests())

	// A silent peer: a raw WebSocket that never reads, so never pongs.
	silentID := herald.NewID(herald.PrefixSubscription)
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/subscriptions/" + silentID + "/listen"
	raw, _, err := websocket.DefaultDialer.Dial(u, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	_, hello, err := raw.ReadMessage() // the hub registers the session before its hello
	require.NoError(t, err)
	require.Contains(t, string(hello), `"type":"hello"`)
	require.True(t, hub.Connected(silentID))
	require.Eventually(t, func() bool { return !hub.Connected(silentID) }, 10*time.Second, 10*time.Millisecond,
		"a listener that does not answer pings is dropped")

	// An oversized frame ends the session.
	bigID := herald.NewID(herald.PrefixSubscription)
	raw2, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/subscriptions/"+bigID+"/listen", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw2.Close() })
	go func() { // answer pings meanwhile
		for {
			if _, _, err := raw2.ReadMessage(); err != nil {
				return
			}
		}
	}()
	big, _ := json.Marshal(map[string]any{"type": "response", "id": "1", "excerpt": strings.Repeat("x", listendest.MaxFrameBytes)})
	require.NoError(t, raw2.WriteMessage(websocket.TextMessage, big))
	require.Eventually(t, func() bool { return !hub.Connected(bigID) }, 10*time.Second, 10*time.Millisecond)

	hub.Close()
	select {
	case err := <-second.done:
		var closed *client.ListenClosedError
		require.ErrorAs(t, err, &closed)
		require.Equal(t, websocket.CloseGoingAway, closed.Code)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the session")
	}
	require.False(t, hub.Connected(subID))
}

// Through the engine on both stores: deliveries made while no listener is
// connected fail transiently and arrive once one connects; a local 500
// is retried through every tier and then dead, its attempts recording
// the local status and body.
func TestEngineTiers(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		hub := listendest.New(listendest.Config{})
		t.Cleanup(hub.Close)
		srv := serveHub(t, hub)
		router := destination.NewRouter(webhook.NewSender(webhook.Config{}))
		router.Register(herald.DestinationListen, hub)
		tiers := delivery.Tiers{0, 100 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
		fanout := ingest.NewFanout(s, nil)
		engine := delivery.New(delivery.Config{Store: s, Sender: router, Fanout: fanout, Tiers: tiers, Workers: 4,
			PollInterval: 50 * time.Millisecond, LeaseMargin: 2 * time.Second})
		ing := ingest.New(ingest.Config{Store: s, Fanout: fanout, OnCommit: engine.Notify, Dispatcher: engine})
		ing.Start()
		engine.Start()
		t.Cleanup(func() { ing.Close(); engine.Stop() })

		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		sub, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: &herald.Subscription{
			ID: herald.NewID(herald.PrefixSubscription), EventTypes: []string{"ok.*", "fail.*"}, Headers: map[string]string{},
			Ordering: herald.OrderingNone, TimeoutMS: 5000, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
			Metadata: json.RawMessage(`{}`), Destination: herald.Destination{Type: herald.DestinationListen},
		}, Secret: webhook.NewSecret(), Now: now})
		require.NoError(t, err)

		deliveryOf := func(eventID string) *store.DeliveryGetResult {
			res, err := s.DeliveryList(ctx, &store.DeliveryListParams{SubscriptionID: sub.ID, EventID: eventID, Limit: 10})
			require.NoError(t, err)
			if len(res.Deliveries) != 1 {
				return nil
			}
			d, err := s.DeliveryGet(ctx, res.Deliveries[0].ID)
			require.NoError(t, err)
			return d
		}
		early, err := ing.PublishOne(ctx, &herald.Event{Type: "ok.early", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.Eventually(t, func() bool { d := deliveryOf(early.ID); return d != nil && len(d.Attempts) >= 1 },
			20*time.Second, 10*time.Millisecond)
		a := deliveryOf(early.ID).Attempts[0]
		require.Equal(t, herald.ErrorConnection, a.Error)
		require.Contains(t, a.ErrorMessage, "no listener connected")

		l := connect(t, srv, sub.ID, localAnswer)
		require.Eventually(t, func() bool { return deliveryOf(early.ID).Delivery.State == herald.DeliveryDelivered },
			20*time.Second, 10*time.Millisecond)
		d := deliveryOf(early.ID)
		last := d.Attempts[len(d.Attempts)-1]
		require.Equal(t, 200, last.Status)
		require.Equal(t, "thanks", last.ResponseExcerpt)
		require.Equal(t, "yes", last.ResponseHeaders["x-local"])

		bad, err := ing.PublishOne(ctx, &herald.Event{Type: "fail.always", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return deliveryOf(bad.ID).Delivery.State == herald.DeliveryDead },
			30*time.Second, 10*time.Millisecond)
		d = deliveryOf(bad.ID)
		require.Len(t, d.Attempts, len(tiers))
		for i, a := range d.Attempts {
			require.Equal(t, i, a.Tier)
			require.Equal(t, 500, a.Status)
			require.Equal(t, herald.ErrorHTTPStatus, a.Error)
			require.Equal(t, "local receiver broke", a.ResponseExcerpt)
		}
		n := 0
		for _, r := range l.requests() {
			if r.EventType == "fail.always" {
				n++
				require.Equal(t, bad.ID, r.EventID)
			}
		}
		require.Equal(t, len(tiers), n, "one request per tier")
	})
}
