package main

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

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/openapi"
	"github.com/heraldhq/herald/openapi/openapitest"
)

// TestEndToEnd is issue 2's "done when", on the real binary and both stores:
// a delivery the official Standard Webhooks verifier accepts; a failing
// receiver drives a delivery through every tier into the dead letters with
// its error metadata and a herald.delivery.dead alert; redrive delivers it
// once the receiver recovers. Only --database-url differs between stores.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			bin := heraldBinary(t)
			args := []string{"--dev", "--api-token", "e2e-token", "--tiers", "0s,200ms,400ms", "--poll-interval", "50ms"}
			args = append(args, storeArgs(t, backend)...)
			addr := freeAddr(t)
			startNode(t, bin, addr, args...)
			ctx := context.Background()
			call := func(method, path string, body any) (int, map[string]any) {
				t.Helper()
				code, b, err := apiCall(ctx, addr, "e2e-token", method, path, body)
				require.NoError(t, err)
				var out map[string]any
				if len(b) > 0 {
					require.NoError(t, json.Unmarshal(b, &out), "%s", b)
				}
				return code, out
			}

			// The document is served as embedded, and the receivers check
			// every request herald sends against its webhooks section.
			doc, err := openapitest.Default()
			require.NoError(t, err)
			resp, err := http.Get("http://" + addr + "/openapi.json")
			require.NoError(t, err)
			served, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Equal(t, openapi.Document(), served)

			// The receiver verifies with the official library, and fails
			// while failing is set.
			var failing atomic.Bool
			var mu sync.Mutex
			var verifier *standardwebhooks.Webhook
			verified := map[string]int{}
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if err := doc.CheckWebhook(r, body); err != nil {
					t.Errorf("OpenAPI: %v", err)
				}
				mu.Lock()
				v := verifier
				mu.Unlock()
				if err := v.Verify(body, r.Header); err != nil {
					t.Errorf("official verifier refused herald's request: %v", err)
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				if failing.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = w.Write([]byte(`{"error":"down for maintenance"}`))
					return
				}
				var ev struct{ ID string }
				_ = json.Unmarshal(body, &ev)
				mu.Lock()
				verified[ev.ID]++
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
			}))
			t.Cleanup(recv.Close)
			alerts := make(chan map[string]any, 10)
			alertRecv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if err := doc.CheckWebhook(r, body); err != nil {
					t.Errorf("OpenAPI: %v", err)
				}
				var ev map[string]any
				_ = json.Unmarshal(body, &ev)
				alerts <- ev
				w.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(alertRecv.Close)

			code, sub := call(http.MethodPost, "/v1/subscriptions", map[string]any{"url": recv.URL, "event_types": []string{"order.*"}})
			require.Equal(t, http.StatusCreated, code, "%v", sub)
			wh, err := standardwebhooks.NewWebhook(sub["secret"].(string))
			require.NoError(t, err)
			mu.Lock()
			verifier = wh
			mu.Unlock()
			subID := sub["id"].(string)
			code, _ = call(http.MethodPost, "/v1/subscriptions", map[string]any{"url": alertRecv.URL, "event_types": []string{"herald.delivery.dead"}})
			require.Equal(t, http.StatusCreated, code)

			// 1. A signed delivery the official verifier accepts.
			code, ev := call(http.MethodPost, "/v1/events", map[string]any{"id": "order-1", "type": "order.created", "data": map[string]any{"n": 1}})
			require.Equal(t, http.StatusAccepted, code, "%v", ev)
			require.Equal(t, float64(1), ev["deliveries"])
			require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return verified["order-1"] == 1 }, 20*time.Second, 10*time.Millisecond)

			// 2. A failing receiver: every tier, then the dead letters.
			failing.Store(true)
			code, _ = call(http.MethodPost, "/v1/events", map[string]any{"id": "order-2", "type": "order.created", "data": map[string]any{"n": 2}})
			require.Equal(t, http.StatusAccepted, code)
			var dead map[string]any
			require.Eventually(t, func() bool {
				_, list := call(http.MethodGet, "/v1/deliveries?event_id=order-2", nil)
				data := list["data"].([]any)
				if len(data) != 1 || data[0].(map[string]any)["state"] != "dead" {
					return false
				}
				_, dead = call(http.MethodGet, "/v1/deliveries/"+data[0].(map[string]any)["id"].(string), nil)
				return true
			}, 30*time.Second, 20*time.Millisecond)
			attempts := dead["attempts"].([]any)
			require.Len(t, attempts, 3, "one attempt per tier")
			for i, a := range attempts {
				a := a.(map[string]any)
				require.Equal(t, float64(i+1), a["n"])
				require.Equal(t, float64(503), a["status"])
				require.Equal(t, "http_status", a["error"])
				require.Contains(t, a["response_excerpt"], "down for maintenance")
			}
			select {
			case alert := <-alerts:
				require.Equal(t, "herald.delivery.dead", alert["type"])
				data := alert["data"].(map[string]any)
				require.Equal(t, "order-2", data["event_id"])
				require.Equal(t, float64(503), data["last_status"])
			case <-time.After(20 * time.Second):
				t.Fatal("no herald.delivery.dead alert")
			}

			// 3. The receiver recovers; redrive delivers it once.
			failing.Store(false)
			code, red := call(http.MethodPost, "/v1/dead-letters/redrive", map[string]any{"subscription_id": subID})
			require.Equal(t, http.StatusAccepted, code)
			require.Equal(t, float64(1), red["redriven"])
			require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return verified["order-2"] == 1 }, 20*time.Second, 10*time.Millisecond)
			// The outcome commits just after the receiver answered.
			require.Eventually(t, func() bool {
				_, list := call(http.MethodGet, "/v1/deliveries?event_id=order-2", nil)
				return list["data"].([]any)[0].(map[string]any)["state"] == "delivered"
			}, 20*time.Second, 10*time.Millisecond)
		})
	}
}
