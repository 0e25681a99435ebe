package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/openapi/openapitest"
	"github.com/heraldhq/herald/store"
)

const testToken = "test-token"

// testTiers are the tiers the test API reports in /v1/stats.
var testTiers = []time.Duration{0, 5 * time.Second, time.Minute, 24 * time.Hour}

type testBundle struct {
	store   store.Store
	handler http.Handler
	// notified receives one value per Notify call (buffered, never blocks).
	notified chan struct{}
}

// setup returns the API over s with a real, started ingester.
func setup(t *testing.T, s store.Store) *testBundle {
	t.Helper()
	ing := ingest.New(ingest.Config{Store: s})
	ing.Start()
	t.Cleanup(ing.Close)
	b := &testBundle{store: s, notified: make(chan struct{}, 1000)}
	b.handler = New(Config{
		Store:     s,
		Publisher: ing,
		Auth:      NewTokenAuth(s, testToken),
		Tiers:     testTiers,
		Notify: func() {
			select {
			case b.notified <- struct{}{}:
			default:
			}
		},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "herald_up 1\n")
		}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return b
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

type reqOption func(*http.Request)

func withToken(token string) reqOption {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// notDocumented marks a request answered by a stand-in handler (an Extra
// route that is not the real service): it is not checked against the
// OpenAPI document.
func notDocumented() reqOption {
	return func(r *http.Request) { r.Header.Set(headerNotDocumented, "1") }
}

// headerNotDocumented carries notDocumented from the option to do; it is
// removed before the request is served.
const headerNotDocumented = "X-Test-Not-Documented"

func withoutToken() reqOption {
	return func(r *http.Request) { r.Header.Del("Authorization") }
}

// do calls the API. body is sent as is when it is a string or []byte, as
// JSON otherwise, and not at all when nil.
func (b *testBundle) do(t *testing.T, method, path string, body any, opts ...reqOption) response {
	t.Helper()
	var rd io.Reader
	var raw []byte
	switch v := body.(type) {
	case nil:
	case string:
		raw = []byte(v)
	case []byte:
		raw = v
	default:
		var err error
		raw, err = json.Marshal(v)
		require.NoError(t, err)
	}
	if body != nil {
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	check := req.Header.Get(headerNotDocumented) == ""
	req.Header.Del(headerNotDocumented)
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	// Every request and its answer are held against the OpenAPI document
	// (see openapitest for the rule on deliberately bad requests).
	if check {
		doc, err := openapitest.Default()
		require.NoError(t, err)
		require.NoError(t, doc.Check(req, raw, rec.Code, rec.Header(), rec.Body.Bytes()))
	}
	return response{code: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// ok requires status and decodes the body into a T.
func ok[T any](t *testing.T, res response, status int) T {
	t.Helper()
	require.Equal(t, status, res.code, "body: %s", res.body)
	var v T
	require.NoError(t, json.Unmarshal(res.body, &v), "body: %s", res.body)
	return v
}

// obj is a decoded JSON object.
type obj = map[string]any

// requireError checks an error answer: status, code, field, and that the
// body has exactly the documented shape.
func requireError(t *testing.T, res response, status int, code herald.Code, field string) errorJSON {
	t.Helper()
	require.Equal(t, status, res.code, "body: %s", res.body)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	var raw map[string]map[string]any
	require.NoError(t, json.Unmarshal(res.body, &raw), "body: %s", res.body)
	require.Len(t, raw, 1, "body: %s", res.body)
	e := raw["error"]
	require.NotNil(t, e, "body: %s", res.body)
	for k := range e {
		require.Contains(t, []string{"code", "message", "field"}, k, "body: %s", res.body)
	}
	require.Equal(t, string(code), e["code"], "body: %s", res.body)
	require.NotEmpty(t, e["message"], "body: %s", res.body)
	if field == "" {
		require.NotContains(t, e, "field", "body: %s", res.body)
	} else {
		require.Equal(t, field, e["field"], "body: %s", res.body)
	}
	msg, _ := e["message"].(string)
	f, _ := e["field"].(string)
	return errorJSON{Code: code, Message: msg, Field: f}
}

// createSub creates a subscription from body and returns the answer.
func (b *testBundle) createSub(t *testing.T, body obj) subscriptionJSON {
	t.Helper()
	if _, ok := body["url"]; !ok {
		body["url"] = "https://example.com/hook"
	}
	return ok[subscriptionJSON](t, b.do(t, http.MethodPost, "/v1/subscriptions", body), http.StatusCreated)
}

// publish publishes one event and returns the answer.
func (b *testBundle) publish(t *testing.T, body obj) publishJSON {
	t.Helper()
	return ok[publishJSON](t, b.do(t, http.MethodPost, "/v1/events", body), http.StatusAccepted)
}

// killDeliveries claims every due tier-0 delivery and completes each as
// dead at diedAt, the way a worker does after the last tier fails.
func (b *testBundle) killDeliveries(t *testing.T, ids []string, diedAt time.Time) {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC()
	claimed, err := b.store.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: 0, Limit: 1000, Now: now, LeaseOwner: "test-node", LeaseUntil: now.Add(time.Minute), LeaseMargin: time.Second,
	})
	require.NoError(t, err)
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var outcomes []store.DeliveryOutcome
	var release []string
	for _, c := range claimed {
		if !want[c.Delivery.ID] {
			release = append(release, c.Delivery.ID)
			continue
		}
		delete(want, c.Delivery.ID)
		outcomes = append(outcomes, store.DeliveryOutcome{
			DeliveryID: c.Delivery.ID,
			LeaseOwner: "test-node",
			Attempt: herald.Attempt{
				N: c.Attempt, At: diedAt, DurationMS: 12, Status: 500, Error: herald.ErrorHTTPStatus,
				ErrorMessage: "HTTP 500", ResponseExcerpt: "boom", Tier: 0,
			},
			State: herald.DeliveryDead,
			Tier:  0,
		})
	}
	require.Empty(t, want, "deliveries not claimable")
	_, err = b.store.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: diedAt})
	require.NoError(t, err)
	if len(release) > 0 {
		_, err = b.store.DeliveryRelease(ctx, &store.DeliveryReleaseParams{IDs: release, LeaseOwner: "test-node", Now: now})
		require.NoError(t, err)
	}
}

// deliveriesOf lists the deliveries of one event.
func (b *testBundle) deliveriesOf(t *testing.T, eventID string) []deliveryJSON {
	t.Helper()
	page := ok[listJSON[deliveryJSON]](t, b.do(t, http.MethodGet, "/v1/deliveries?event_id="+eventID, nil), http.StatusOK)
	return page.Data
}
