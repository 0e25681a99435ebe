package main

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIConnections: herald connections create/list/get/update/delete
// against a running herald, the password never printed, delete refused
// while a subscription made with the --destination-* flags uses it.
func TestCLIConnections(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		const password = "cl1Secret"
		c := h.okJSON("connections", "create", "--name", "rabbit", "--type", "amqp",
			"--url", "amqp://guest:"+password+"@127.0.0.1:5672/", "--tenants", "acme, globex", "--tls-server-name", "rabbit.internal")[0]
		require.Equal(t, "amqp://guest:***@127.0.0.1:5672/", c["url"])
		require.Equal(t, []any{"acme", "globex"}, c["tenants"])
		require.Equal(t, map[string]any{"server_name": "rabbit.internal"}, c["tls"])
		out := h.ok("connections", "create", "--name", "bus", "--type", "nats", "--url", "nats://127.0.0.1:4222", "--all-tenants")
		require.Contains(t, out, "nats://127.0.0.1:4222")
		require.Contains(t, out, "all")

		list := h.okJSON("connections", "list")
		require.Len(t, list, 2)
		require.Equal(t, "bus", list[0]["name"])
		table := h.ok("connections", "list")
		require.Contains(t, table, "rabbit")
		require.NotContains(t, table, password)
		got := h.ok("connections", "get", "rabbit")
		require.Contains(t, got, "server_name=rabbit.internal")
		require.NotContains(t, got, password)

		upd := h.okJSON("connections", "update", "rabbit", "--url", "amqp://guest:***@127.0.0.1:5672/vh", "--all-tenants", "--no-tls")[0]
		require.Equal(t, "amqp://guest:***@127.0.0.1:5672/vh", upd["url"])
		require.Equal(t, "all", upd["tenants"])
		require.Nil(t, upd["tls"])

		// Subscriptions name connections with --destination-* flags.
		sub := h.okJSON("subscriptions", "create", "--destination-type", "amqp", "--destination-connection", "rabbit",
			"--destination-exchange", "events", "--event-types", "order.*")[0]
		require.Equal(t, map[string]any{"type": "amqp", "connection": "rabbit", "exchange": "events", "routing_key": ""}, sub["destination"])
		require.NotContains(t, sub, "url")
		id := sub["id"].(string)
		upd = h.okJSON("subscriptions", "update", id, "--destination-routing-key", "orders")[0]
		require.Equal(t, "orders", upd["destination"].(map[string]any)["routing_key"])
		require.Contains(t, h.ok("subscriptions", "get", id), "amqp rabbit exchange=events routing_key=orders")
		require.Contains(t, h.ok("subscriptions", "list"), "amqp rabbit")
		upd = h.okJSON("subscriptions", "update", id, "--destination-type", "nats", "--destination-connection", "bus",
			"--destination-subject", "orders.created")[0]
		require.Equal(t, map[string]any{"type": "nats", "connection": "bus", "subject": "orders.created"}, upd["destination"])

		r := h.run("connections", "delete", "bus")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: conflict: ")
		require.Contains(t, r.stderr, id)
		del := h.okJSON("connections", "delete", "rabbit")[0]
		require.Equal(t, true, del["deleted"])

		// Web Push from a file holding the browser's PushSubscription
		// (http endpoint: the test server runs with --dev).
		k, err := ecdh.P256().GenerateKey(rand.Reader)
		require.NoError(t, err)
		f := filepath.Join(t.TempDir(), "push.json")
		require.NoError(t, os.WriteFile(f, []byte(`{"endpoint":"http://127.0.0.1:1/wpush/x","expirationTime":null,"keys":{"p256dh":"`+
			base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes())+`","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`), 0o600))
		wp := h.okJSON("subscriptions", "create", "--destination-type", "webpush", "--destination-push-subscription", "@"+f,
			"--destination-urgency", "high", "--destination-ttl-s", "60")[0]
		d := wp["destination"].(map[string]any)
		require.Equal(t, "high", d["urgency"])
		require.Equal(t, float64(60), d["ttl_s"])
		require.Equal(t, "http://127.0.0.1:1/wpush/x", d["subscription"].(map[string]any)["endpoint"])

		// API errors come back as the API says them; usage errors never
		// reach the server.
		r = h.run("subscriptions", "create", "--destination-type", "redis", "--destination-connection", "bus")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: missing_field: destination.stream is required")
		r = h.run("connections", "create", "--name", "x", "--type", "redis", "--url", "amqp://h")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: invalid_field: url")
		for _, args := range [][]string{
			{"connections", "create", "--name", "x"},
			{"connections", "create", "--name", "x", "--type", "redis", "--url", "redis://h", "--tenants", "a", "--all-tenants"},
			{"connections", "update", "x"},
			{"connections", "update", "x", "--no-tls", "--tls-ca-file", "/ca.pem"},
			{"connections", "get"},
			{"subscriptions", "create", "--destination-connection", "bus"},
			{"subscriptions", "create", "--destination-type", "webpush", "--destination-push-subscription", "{"},
			{"subscriptions", "create", "--destination-type", "webpush", "--destination-push-subscription", "@/nonexistent/push.json"},
		} {
			r := h.run(args...)
			require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		}
	})
}
