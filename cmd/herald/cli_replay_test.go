package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCLIResendAndReplay(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		recv := newReceiver(t)
		subID := h.okJSON("subscriptions", "create", "--url", recv.URL, "--event-types", "order.*")[0]["id"].(string)
		h.ok("events", "publish", "--type", "order.created", "--id", "ord-1")
		h.ok("events", "publish", "--type", "order.paid", "--id", "ord-2")
		h.ok("events", "publish", "--type", "user.created", "--id", "usr-1")
		require.Eventually(t, func() bool { return recv.hits.Load() == 2 }, 20*time.Second, 10*time.Millisecond)

		// Resend: flags after the event id, as the usage line shows them.
		res := h.okJSON("events", "resend", "ord-1", "--subscription", subID)[0]
		require.Equal(t, "ord-1", res["event_id"])
		require.Equal(t, subID, res["subscription_id"])
		require.Contains(t, h.ok("events", "resend", "ord-1", "--subscription-id", subID), "resent ord-1 to "+subID+": delivery dlv_")
		require.Eventually(t, func() bool { return recv.hits.Load() == 4 }, 20*time.Second, 10*time.Millisecond)
		require.Equal(t, exitUsage, h.run("events", "resend", "ord-1").code)
		r := h.run("events", "resend", "nope", "--subscription", subID)
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: not_found: ")

		// Replay: a dry run counts; without a terminal or --yes nothing is
		// sent; --yes sends.
		dry := h.okJSON("subscriptions", "replay", subID, "--since", "1h", "--dry-run")[0]
		require.Equal(t, float64(2), dry["matched"])
		require.Contains(t, h.ok("subscriptions", "replay", subID, "--since", "1h", "--event-types", "order.paid", "--dry-run"), "1 event(s) match")
		r = h.run("subscriptions", "replay", subID, "--since", "1h")
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "--yes")
		env := testEnv("y\n")
		env.stdinTTY = true
		r = h.runEnv(context.Background(), env, "subscriptions", "replay", subID, "--since", "1h", "--until", time.Now().Add(time.Minute).UTC().Format(time.RFC3339), "--json")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stderr, "Replay 2 event(s) to "+subID)
		require.Equal(t, []map[string]any{{"matched": float64(2), "replayed": float64(2), "dry_run": false, "truncated": false, "next_cursor": nil}},
			jsonLines(t, r.stdout))
		require.Eventually(t, func() bool { return recv.hits.Load() == 6 }, 20*time.Second, 10*time.Millisecond)
		require.Contains(t, h.ok("subscriptions", "replay", subID, "--since", "1h", "--yes"), "replayed 2 of 2 matching event(s)")

		require.Equal(t, exitUsage, h.run("subscriptions", "replay", subID).code)
		r = h.run("subscriptions", "replay", subID, "--since", "800h", "--dry-run")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "31 days")
	})
}
