package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runAs runs a client command with another token than the admin one.
func (h *cliHarness) runAs(token string, args ...string) cliResult {
	h.t.Helper()
	env := testEnv("")
	err := runClient(context.Background(), append(args, "--server", h.server, "--token", token), env)
	if err != nil {
		fmt.Fprintln(env.stderr, "herald:", err)
	}
	return cliResult{stdout: fmt.Sprint(env.stdout), stderr: fmt.Sprint(env.stderr), code: exitCode(err)}
}

// TestCLITokensAndTenants: the README's "Sending webhooks to your
// customers" flow through the CLI, on both stores.
func TestCLITokensAndTenants(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		rcv := newReceiver(t)
		tok := h.okJSON("tokens", "create", "--name", "acme", "--tenant", "acme", "--expires", "720h",
			"--scopes", "events:publish,events:read,subscriptions:read,subscriptions:write,deliveries:read")[0]
		token, _ := tok["token"].(string)
		require.True(t, strings.HasPrefix(token, "hrld_"), "%v", tok)
		require.Equal(t, "acme", tok["tenant"])

		// The customer's own subscription, through its token: tenant stamped.
		r := h.runAs(token, "subscriptions", "create", "--url", rcv.URL, "--json")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "acme", jsonLines(t, r.stdout)[0]["tenant"])
		h.ok("subscriptions", "create", "--url", rcv.URL+"/internal")
		require.Len(t, h.okJSON("subscriptions", "list", "--tenant", "acme"), 1)
		require.Len(t, h.okJSON("subscriptions", "list"), 2)

		// Publishing for the tenant reaches only its subscription.
		pub := h.okJSON("events", "publish", "--type", "order.created", "--tenant", "acme")[0]
		require.EqualValues(t, 1, pub["deliveries"])
		r = h.runAs(token, "events", "publish", "--type", "order.created", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		require.Len(t, h.okJSON("events", "list", "--tenant", "acme"), 2)
		require.Len(t, h.okJSON("deliveries", "list", "--tenant", "acme"), 2)

		// Per-tenant stats: acme and the untenanted subscription; with
		// --limit 1 the second is summed into the "other" line.
		st := h.okJSON("stats", "--tenants")
		require.Len(t, st, 2)
		require.EqualValues(t, 1, st[0]["subscriptions"])
		st = h.okJSON("stats", "--tenants", "--limit", "1")
		require.Len(t, st, 2)
		require.Equal(t, true, st[1]["other"])
		require.Contains(t, h.ok("stats", "--tenants", "--limit", "1"), "(others)")
		r = h.run("stats", "--limit", "3")
		require.Equal(t, 2, r.code, r.stderr)

		// The tenant token cannot reach admin commands.
		r = h.runAs(token, "tokens", "list")
		require.NotEqual(t, 0, r.code)
		require.Contains(t, r.stderr, "forbidden")

		list := h.okJSON("tokens", "list")
		require.Len(t, list, 1)
		require.NotContains(t, list[0], "token")
		id, _ := tok["id"].(string)
		h.ok("tokens", "revoke", id)
		r = h.runAs(token, "events", "list")
		require.NotEqual(t, 0, r.code)
		require.Contains(t, r.stderr, "unauthorized")
	})
}
