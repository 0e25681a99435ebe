package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
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

// script is what the receiver answers per attempt: responses[attempt-1],
// the last one repeating.
type step struct {
	DelayMS int `json:"delay_ms"`
	Status  int `json:"status"`
}

// receiver is a local endpoint that follows each event's script and records
// what it accepted (2xx) by event id.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret string

	mu       sync.Mutex
	accepted map[string][]int // event id -> attempts that got 2xx
	seen     map[string]int   // event id -> requests
	bodies   map[string]json.RawMessage
}

func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{t: t, secret: secret, accepted: map[string][]int{}, seen: map[string]int{}, bodies: map[string]json.RawMessage{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if err := webhook.Verify([]string{r.secret}, req.Header, body, time.Now(), 5*time.Minute); err != nil {
		r.t.Errorf("signature does not verify: %v", err)
	}
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			Script []step `json:"script"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("bad body %q: %v", body, err)
		return
	}
	attempt, _ := strconv.Atoi(req.Header.Get("herald-attempt"))
	st := step{Status: 200}
	if n := len(ev.Data.Script); n > 0 {
		st = ev.Data.Script[min(attempt-1, n-1)]
	}
	r.mu.Lock()
	r.seen[ev.ID]++
	r.bodies[ev.ID] = body
	r.mu.Unlock()
	if st.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(st.DelayMS) * time.Millisecond):
		case <-req.Context().Done():
			return
		}
	}
	if st.Status >= 200 && st.Status < 300 {
		r.mu.Lock()
		r.accepted[ev.ID] = append(r.accepted[ev.ID], attempt)
		r.mu.Unlock()
	}
	w.WriteHeader(st.Status)
	_, _ = fmt.Fprintf(w, `{"answer":%d}`, st.Status)
}

func (r *receiver) acceptedCopy() map[string][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]int, len(r.accepted))
	for k, v := range r.accepted {
		out[k] = append([]int(nil), v...)
	}
	return out
}

type harness struct {
	store  store.Store
	ing    *ingest.Ingester
	engine *delivery.Engine
}

func setup(t *testing.T, s store.Store, tiers delivery.Tiers) *harness {
	t.Helper()
	return setupWorkers(t, s, tiers, 8)
}

// setupIngestOnly runs an ingester with no engine (work piles up).
func setupIngestOnly(t *testing.T, s store.Store) *ingest.Ingester {
	t.Helper()
	ing := ingest.New(ingest.Config{Store: s})
	ing.Start()
	t.Cleanup(ing.Close)
	return ing
}

// setupWorkers wires an ingester and an engine as herald serve does,
// direct dispatch included.
func setupWorkers(t *testing.T, s store.Store, tiers delivery.Tiers, workers int) *harness {
	t.Helper()
	fanout := ingest.NewFanout(s, nil)
	engine := delivery.New(delivery.Config{
		Store:             s,
		Sender:            webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
		Fanout:            fanout,
		Tiers:             tiers,
		Workers:           workers,
		LeaseMargin:       2 * time.Second,
		PollInterval:      100 * time.Millisecond,
		RebalanceInterval: 100 * time.Millisecond,
		RescueInterval:    200 * time.Millisecond,
	})
	ing := ingest.New(ingest.Config{
		Store: s, Fanout: fanout, Tier0Delay: tiers[0], OnCommit: engine.Notify, Dispatcher: engine,
	})
	ing.Start()
	engine.Start()
	t.Cleanup(func() {
		ing.Close()
		engine.Stop()
	})
	return &harness{store: s, ing: ing, engine: engine}
}

func createSub(t *testing.T, s store.Store, url string, timeout time.Duration, types []string, secret string) *herald.Subscription {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub := &herald.Subscription{
		ID: herald.NewID(herald.PrefixSubscription), URL: url, Method: http.MethodPost,
		EventTypes: types, Headers: map[string]string{}, Ordering: herald.OrderingNone,
		TimeoutMS: timeout.Milliseconds(), State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
		Metadata: json.RawMessage(`{}`),
	}
	created, err := s.SubscriptionCreate(context.Background(), &store.SubscriptionCreateParams{Subscription: sub, Secret: secret, Now: now})
	require.NoError(t, err)
	return created
}

func publish(t *testing.T, ing *ingest.Ingester, typ string, script []step) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"script": script})
	require.NoError(t, err)
	res, err := ing.PublishOne(context.Background(), &herald.Event{Type: typ, Data: data})
	require.NoError(t, err)
	return res.ID
}

// finished waits until every delivery of the subscription is delivered or
// dead, and returns them by event id.
func finished(t *testing.T, s store.Store, subID string, want int) map[string]*herald.Delivery {
	t.Helper()
	out := map[string]*herald.Delivery{}
	require.Eventually(t, func() bool {
		res, err := s.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: subID, Limit: 1000})
		if err != nil || len(res.Deliveries) < want {
			return false
		}
		for _, d := range res.Deliveries {
			if !d.State.Finished() {
				return false
			}
		}
		for _, d := range res.Deliveries {
			out[d.EventID] = d
		}
		return true
	}, 60*time.Second, 20*time.Millisecond)
	return out
}

// TestNotifierMatrix is the DSS notifier test (reference §1) on both
// stores: with N tiers, n-1 failures then success is delivered on attempt
// n; N failures is dead; always slower than the timeout is dead; slow once
// then fast is delivered on attempt 2; fast success is delivered at once.
// No healthy case is received twice.
func TestNotifierMatrix(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		tiers := delivery.Tiers{0, 200 * time.Millisecond, 400 * time.Millisecond}
		const timeout = 300 * time.Millisecond
		h := setup(t, s, tiers)
		secret := webhook.NewSecret()
		recv := newReceiver(t, secret)
		sub := createSub(t, s, recv.srv.URL, timeout, []string{"case.*"}, secret)
		alerts := newReceiver(t, secret)
		alertSub := createSub(t, s, alerts.srv.URL, timeout, []string{"herald.delivery.dead"}, secret)

		type want struct {
			delivered bool
			attempt   int // attempt that succeeded, or attempts made when dead
		}
		expect := map[string]want{}
		names := map[string]string{}
		fail := step{Status: 500}
		ok := step{Status: 200}
		slow := step{DelayMS: int(2 * timeout / time.Millisecond), Status: 200}
		halfOK := step{DelayMS: int(timeout / 2 / time.Millisecond), Status: 200}
		halfFail := step{DelayMS: int(timeout / 2 / time.Millisecond), Status: 500}
		for n := 1; n <= len(tiers); n++ {
			script := make([]step, 0, n)
			for i := 0; i < n-1; i++ {
				script = append(script, fail)
			}
			script = append(script, ok)
			id := publish(t, h.ing, "case.retry", script)
			expect[id], names[id] = want{true, n}, "case.retry"
		}
		allFail := make([]step, len(tiers))
		for i := range allFail {
			allFail[i] = fail
		}
		id := publish(t, h.ing, "case.dead", append(allFail, ok))
		expect[id], names[id] = want{false, len(tiers)}, "case.dead"
		id = publish(t, h.ing, "case.slow", []step{slow})
		expect[id], names[id] = want{false, len(tiers)}, "case.slow"
		id = publish(t, h.ing, "case.slow_once", []step{slow, ok})
		expect[id], names[id] = want{true, 2}, "case.slow_once"
		id = publish(t, h.ing, "case.half_ok", []step{halfOK})
		expect[id], names[id] = want{true, 1}, "case.half_ok"
		id = publish(t, h.ing, "case.half_fail", []step{halfFail})
		expect[id], names[id] = want{false, len(tiers)}, "case.half_fail"

		got := finished(t, s, sub.ID, len(expect))
		accepted := recv.acceptedCopy()
		dead := 0
		for evID, w := range expect {
			d := got[evID]
			require.NotNil(t, d, "no delivery for %s", evID)
			if w.delivered {
				require.Equal(t, herald.DeliveryDelivered, d.State, "event %s", evID)
				require.Equal(t, []int{w.attempt}, accepted[evID], "event %s: exactly one accepted request, on attempt %d", evID, w.attempt)
				require.Equal(t, w.attempt, d.AttemptCount)
			} else {
				dead++
				require.Equal(t, herald.DeliveryDead, d.State, "event %s", evID)
				require.Empty(t, accepted[evID], "event %s (%s) must not have been accepted", evID, names[evID])
				require.Equal(t, w.attempt, d.AttemptCount)
				full, err := s.DeliveryGet(context.Background(), d.ID)
				require.NoError(t, err)
				require.Len(t, full.Attempts, len(tiers))
				for i, a := range full.Attempts {
					require.Equal(t, i+1, a.N)
					require.Equal(t, i, a.Tier)
					require.NotEmpty(t, a.Error)
				}
				require.NotEmpty(t, full.Delivery.LastError)
			}
		}
		require.Len(t, accepted, len(expect)-dead)

		// Every dead delivery raised exactly one herald.delivery.dead event,
		// delivered to the alert subscription.
		gotAlerts := finished(t, s, alertSub.ID, dead)
		require.Len(t, gotAlerts, dead)
		alerts.mu.Lock()
		defer alerts.mu.Unlock()
		seenDead := map[string]bool{}
		for _, body := range alerts.bodies {
			var ev struct {
				Type string `json:"type"`
				Data struct {
					DeliveryID string `json:"delivery_id"`
					EventID    string `json:"event_id"`
					Error      string `json:"error"`
					Attempts   int    `json:"attempts"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(body, &ev))
			require.Equal(t, herald.EventTypeDeliveryDead, ev.Type)
			require.False(t, expect[ev.Data.EventID].delivered)
			require.NotEmpty(t, ev.Data.Error)
			require.Equal(t, len(tiers), ev.Data.Attempts)
			seenDead[ev.Data.EventID] = true
		}
		require.Len(t, seenDead, dead)
	})
}

// A 410 disables the subscription and raises herald.subscription.disabled;
// later events create no deliveries for it until it is re-enabled.
func TestGoneDisablesSubscription(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		h := setup(t, s, delivery.Tiers{0, 100 * time.Millisecond})
		secret := webhook.NewSecret()
		recv := newReceiver(t, secret)
		sub := createSub(t, s, recv.srv.URL, time.Second, []string{"gone.*"}, secret)
		alerts := newReceiver(t, secret)
		alertSub := createSub(t, s, alerts.srv.URL, time.Second, []string{"herald.subscription.*"}, secret)

		publish(t, h.ing, "gone.now", []step{{Status: http.StatusGone}})
		got := finished(t, s, sub.ID, 1)
		for _, d := range got {
			require.Equal(t, herald.DeliveryDead, d.State)
			require.Equal(t, herald.ErrorGone, d.LastError)
			require.Equal(t, 1, d.AttemptCount, "a 410 is not retried")
		}
		cur, err := s.SubscriptionGet(context.Background(), sub.ID)
		require.NoError(t, err)
		require.Equal(t, herald.SubscriptionDisabled, cur.State)
		require.NotEmpty(t, cur.DisabledReason)

		finished(t, s, alertSub.ID, 1)
		alerts.mu.Lock()
		require.Len(t, alerts.bodies, 1)
		for _, b := range alerts.bodies {
			require.Contains(t, string(b), herald.EventTypeSubscriptionDisabled)
			require.Contains(t, string(b), sub.ID)
		}
		alerts.mu.Unlock()

		res, err := h.ing.PublishOne(context.Background(), &herald.Event{Type: "gone.again", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		require.Zero(t, res.DeliveryCount, "a disabled subscription gets no new deliveries")
	})
}

// Retry-After on 429 postpones the next attempt at least that long.
func TestRetryAfterRespected(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		h := setup(t, s, delivery.Tiers{0, 10 * time.Millisecond, 10 * time.Millisecond})
		var mu sync.Mutex
		var times []time.Time
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			times = append(times, time.Now())
			n := len(times)
			mu.Unlock()
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		sub := createSub(t, s, srv.URL, time.Second, nil, webhook.NewSecret())
		publish(t, h.ing, "x.y", nil)
		got := finished(t, s, sub.ID, 1)
		for _, d := range got {
			require.Equal(t, herald.DeliveryDelivered, d.State)
			require.Equal(t, 2, d.AttemptCount)
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, times, 2)
		require.GreaterOrEqual(t, times[1].Sub(times[0]), 990*time.Millisecond)
	})
}
