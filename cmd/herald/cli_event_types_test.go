package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIEventTypes: herald event-types create/list/get/update/delete
// against a running herald: flags reach their fields (schema from a
// file), a bad example is refused with the path, validation then refuses
// a publish, and any token reads the catalog.
func TestCLIEventTypes(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		schema := filepath.Join(t.TempDir(), "schema.json")
		require.NoError(t, os.WriteFile(schema,
			[]byte(`{"type":"object","required":["amount"],"properties":{"amount":{"type":"number"}}}`), 0o600))
		et := h.okJSON("event-types", "create", "--name", "order.placed", "--description", "An order was placed.",
			"--schema", "@"+schema, "--example", `{"amount": 12.5}`, "--validate")[0]
		require.Equal(t, "An order was placed.", et["description"])
		require.Equal(t, map[string]any{"amount": 12.5}, et["example"])
		require.Equal(t, true, et["validate"])
		require.Equal(t, "object", et["schema"].(map[string]any)["type"])

		r := h.run("event-types", "create", "--name", "order.refunded", "--schema", "@"+schema, "--example", `{"amount":"x"}`)
		require.NotEqual(t, 0, r.code)
		require.Contains(t, r.stderr, "example.amount")
		r = h.run("event-types", "create", "--name", "order.*")
		require.NotEqual(t, 0, r.code)
		require.Contains(t, r.stderr, "not a pattern")
		r = h.run("event-types", "create", "--description", "x")
		require.Equal(t, 2, r.code, "usage error: %s", r.stderr)

		h.ok("event-types", "create", "--name", "user.created", "--deprecated")
		require.Len(t, h.okJSON("event-types", "list"), 1, "deprecated types are left out")
		require.Len(t, h.okJSON("event-types", "list", "--include-deprecated"), 2)
		table := h.ok("event-types", "list")
		require.Contains(t, table, "order.placed")
		require.Contains(t, table, "An order was placed.")
		out := h.ok("event-types", "get", "order.placed")
		require.Contains(t, out, "schema:")
		require.Contains(t, out, `"amount": 12.5`)

		r = h.run("events", "publish", "--type", "order.placed", "--data", `{"amount":"12"}`)
		require.NotEqual(t, 0, r.code)
		require.Contains(t, r.stderr, "schema_mismatch")
		require.Contains(t, r.stderr, "data.amount")

		up := h.okJSON("event-types", "update", "order.placed", "--validate=false", "--no-example", "--description", "Placed.")[0]
		require.Equal(t, false, up["validate"])
		require.Nil(t, up["example"])
		require.Equal(t, "Placed.", up["description"])
		h.ok("events", "publish", "--type", "order.placed", "--data", `{"amount":"12"}`)
		r = h.run("event-types", "update", "order.placed")
		require.Equal(t, 2, r.code, "nothing to change is a usage error: %s", r.stderr)

		ro := h.okJSON("tokens", "create", "--name", "reader", "--scopes", "events:read")[0]["token"].(string)
		r = h.runAs(ro, "event-types", "list", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "order.placed")
		r = h.runAs(ro, "event-types", "delete", "order.placed")
		require.NotEqual(t, 0, r.code)
		require.Contains(t, r.stderr, "forbidden")

		h.ok("event-types", "delete", "order.placed")
		r = h.run("event-types", "get", "order.placed")
		require.NotEqual(t, 0, r.code)
		require.Contains(t, r.stderr, "not_found")
	})
}
