package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TestFirefoxWebPushDestination is the webpush destination end to end in
// a real browser: headless Firefox ESR subscribes to herald's own push
// service with applicationServerKey = herald's VAPID key (from GET
// /v1/webpush/vapid-public-key), its PushSubscription becomes a webpush
// subscription, an event published to herald is encrypted and VAPID-signed
// by the webpush destination, and the service worker reports the
// decrypted event envelope. The endpoint is http://127.0.0.1, so --dev.
func TestFirefoxWebPushDestination(t *testing.T) {
	ffBin := firefoxBinary(t)
	addr := freeAddr(t)

	c := &config{}
	fs := flag.NewFlagSet("test node", flag.ContinueOnError)
	c.flags(fs)
	require.NoError(t, fs.Parse(nil))
	c.Listen, c.DataDir, c.Dev, c.APIToken = addr, t.TempDir(), true, "test-token"
	c.VAPIDSubject = "mailto:ops@example.test"
	c.ShutdownWait = 2 * time.Second
	require.NoError(t, c.validate())
	logs := &syncBuffer{}
	n, err := startHeraldNode(t.Context(), c, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	t.Cleanup(func() {
		n.stop()
		if t.Failed() {
			t.Logf("herald logs:\n%s", logs.Tail(60))
		}
	})
	base := "http://" + addr

	// The page's applicationServerKey is herald's VAPID key, read where a
	// page reads it: the unauthenticated route.
	resp, err := http.Get(base + "/v1/webpush/vapid-public-key")
	require.NoError(t, err)
	var key struct {
		PublicKey string `json:"public_key"`
	}
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&key))
	_ = resp.Body.Close()
	require.Len(t, key.PublicKey, 87)

	page := newPageServer(t, key.PublicKey)
	profile := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(profile, "user.js"),
		[]byte(fmt.Sprintf(firefoxPrefs, "ws://"+addr+"/")), 0o600))
	startFirefox(t, ffBin, profile, page.URL+"/")

	var endpoint, p256dh, auth string
	waitFor(t, 90*time.Second, func() (bool, string) {
		subs, _, logs := page.state()
		if len(subs) == 0 {
			return false, strings.Join(logs, "\n")
		}
		endpoint, p256dh, auth = subs[0].Endpoint, subs[0].Keys.P256dh, subs[0].Keys.Auth
		return true, ""
	}, func(last string) string { return "no subscription from Firefox; page errors: " + last })
	require.True(t, strings.HasPrefix(endpoint, base+"/wpush/v2/"), endpoint)

	// The browser's PushSubscription becomes a webpush subscription, as
	// the page's backend would make it.
	dest := herald.Destination{Type: herald.DestinationWebPush,
		Subscription: &herald.PushSubscription{Endpoint: endpoint, Keys: herald.PushKeys{P256DH: p256dh, Auth: auth}},
		Urgency:      "high"}
	subID := createWebPushSubscription(t, base, dest)

	// An event published to herald arrives, decrypted, in the service
	// worker.
	req, err := http.NewRequest(http.MethodPost, base+"/v1/events",
		strings.NewReader(`{"type":"order.paid","key":"order-42","data":{"text":"hello from herald's webpush destination ✓"}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)

	var env struct {
		Type string `json:"type"`
		Data struct {
			Text string `json:"text"`
		} `json:"data"`
	}
	waitFor(t, 60*time.Second, func() (bool, string) {
		_, got, _ := page.state()
		for _, g := range got {
			if json.Unmarshal([]byte(g), &env) == nil && env.Type == "order.paid" {
				return true, ""
			}
		}
		return false, strings.Join(got, " | ")
	}, func(last string) string { return "Firefox did not receive the event; got: " + last })
	require.Equal(t, "hello from herald's webpush destination ✓", env.Data.Text)

	// herald counts it delivered.
	res, err := n.store.DeliveryList(t.Context(), &store.DeliveryListParams{SubscriptionID: subID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, res.Deliveries, 1)
	waitFor(t, 30*time.Second, func() (bool, string) {
		d, err := n.store.DeliveryGet(t.Context(), res.Deliveries[0].ID)
		if err != nil {
			return false, err.Error()
		}
		return d.Delivery.State == herald.DeliveryDelivered, string(d.Delivery.State)
	}, func(last string) string { return "the delivery is " + last })
}

// createWebPushSubscription creates a subscription to dest through POST
// /v1/subscriptions and returns its id.
func createWebPushSubscription(t *testing.T, base string, dest herald.Destination) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"event_types": []string{"order.*"}, "destination": dest, "timeout_ms": 10000})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/v1/subscriptions", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", out)
	var sub struct {
		ID          string             `json:"id"`
		Destination herald.Destination `json:"destination"`
	}
	require.NoError(t, json.Unmarshal(out, &sub))
	require.Equal(t, herald.DestinationWebPush, sub.Destination.Type, "%s", out)
	require.Equal(t, dest.Subscription.Endpoint, sub.Destination.Subscription.Endpoint)
	return sub.ID
}
