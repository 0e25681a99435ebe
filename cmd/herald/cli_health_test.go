package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLISubscriptionHealth: --auto-disable sets, turns off and resets the
// rule; subscriptions get shows the health and the rule in force.
func TestCLISubscriptionHealth(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		recv := newReceiver(t)
		recv.status.Store(http.StatusInternalServerError)
		sub := h.okJSON("subscriptions", "create", "--url", recv.URL, "--auto-disable", "3/1h")[0]
		id := sub["id"].(string)
		require.Equal(t, map[string]any{"consecutive_failures": float64(3), "min_duration_s": float64(3600)}, sub["auto_disable"])

		out := h.ok("subscriptions", "get", id)
		require.Contains(t, out, "no failures since the last success; no attempts in 24h")
		require.Contains(t, out, "after 3 failed attempts in a row over at least 1h0m0s")

		// A failed test attempt starts a streak.
		r := h.run("subscriptions", "test", id, "--wait")
		require.Equal(t, exitAPI, r.code, r.stderr)
		out = h.ok("subscriptions", "get", id)
		// (The harness retries it at once: one or more attempts.)
		require.Regexp(t, `\d+ failed attempts? in a row since \S+; 0\.0% of \d+ attempts? succeeded in 24h`, out)
		got := h.okJSON("subscriptions", "get", id)[0]
		health := got["health"].(map[string]any)
		require.GreaterOrEqual(t, health["consecutive_failures"], float64(1))
		require.NotNil(t, health["failing_since"])

		upd := h.okJSON("subscriptions", "update", id, "--auto-disable", "never")[0]
		require.Contains(t, upd, "auto_disable")
		require.Nil(t, upd["auto_disable"])
		require.Contains(t, h.ok("subscriptions", "get", id), "never")
		upd = h.okJSON("subscriptions", "update", id, "--auto-disable", "default")[0]
		require.NotContains(t, upd, "auto_disable")
		require.Contains(t, h.ok("subscriptions", "get", id), "after 20 failed attempts in a row over at least 120h0m0s")

		for _, v := range []string{"0", "x", "3/soon", "-1/1h"} {
			r := h.run("subscriptions", "update", id, "--auto-disable", v)
			require.Equal(t, exitUsage, r.code, "%s: %s", v, r.stderr)
		}
	})
}
