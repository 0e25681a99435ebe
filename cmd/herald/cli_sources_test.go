package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/client"
)

// TestCLISources: herald sources create/list/get/update/delete against a
// running herald: every flag reaches its field, --map-* on update change
// only those expressions, get shows the status, the connection cannot be
// deleted while a source uses it, usage errors never reach the server.
func TestCLISources(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		h.ok("connections", "create", "--name", "rabbit", "--type", "amqp", "--url", "amqp://guest:guest@127.0.0.1:5672/", "--tenants", "acme")
		h.ok("connections", "create", "--name", "bus", "--type", "nats", "--url", "nats://127.0.0.1:4222")
		h.ok("connections", "create", "--name", "rd", "--type", "redis", "--url", "redis://127.0.0.1:6379/0")
		h.ok("connections", "create", "--name", "mq", "--type", "mqtt", "--url", "mqtt://127.0.0.1:1883")

		// Not yet created queues and streams: herald reports them in the
		// status; the sources stay disabled so no node dials for them.
		src := h.okJSON("sources", "create", "--name", "publishing", "--type", "amqp", "--connection", "rabbit",
			"--queue", "cli-src-content", "--map-key", "body.content_id", "--map-version", "body.payload_version",
			"--tenant", "acme", "--ordered", "--prefetch", "64", "--disabled")[0]
		require.Equal(t, map[string]any{"key": "body.content_id", "version": "body.payload_version"}, src["mapping"])
		require.Equal(t, "cli-src-content", src["queue"])
		require.Equal(t, "acme", src["tenant"])
		require.Equal(t, true, src["ordered"])
		require.Equal(t, false, src["enabled"])
		require.Equal(t, float64(64), src["prefetch"])
		n := h.okJSON("sources", "create", "--name", "orders", "--type", "nats", "--connection", "bus", "--stream", "CLISRC",
			"--subject", "orders.>", "--map-id", "headers.\"Nats-Msg-Id\"", "--map-type", "subject", "--map-data", "body.order",
			"--map-tenant", "body.tenant", "--disabled")[0]
		require.Equal(t, "herald", n["durable"])
		require.Equal(t, "orders.>", n["subject"])
		require.Equal(t, map[string]any{"id": `headers."Nats-Msg-Id"`, "type": "subject", "data": "body.order", "tenant": "body.tenant"}, n["mapping"])
		r := h.okJSON("sources", "create", "--name", "jobs", "--type", "redis", "--connection", "rd", "--stream", "cli-src-jobs",
			"--group", "workers", "--disabled")[0]
		require.Equal(t, "workers", r["group"])
		require.Nil(t, r["mapping"])
		out := h.ok("sources", "create", "--name", "sensors", "--type", "mqtt", "--connection", "mq", "--topic", "cli-src/+/temp", "--disabled")
		require.Contains(t, out, "topic=cli-src/+/temp")
		require.Contains(t, out, "(defaults: the body is the data)")
		require.Contains(t, out, "256 (default)")

		list := h.okJSON("sources", "list")
		require.Len(t, list, 4)
		require.Equal(t, "jobs", list[0]["name"])
		require.Len(t, h.okJSON("sources", "list", "--limit", "1"), 1)
		table := h.ok("sources", "list")
		require.Contains(t, table, "stream=CLISRC durable=herald subject=orders.>")
		require.Contains(t, table, "queue=cli-src-content")

		got := h.okJSON("sources", "get", "publishing")[0]
		status := got["status"].(map[string]any)
		for _, k := range []string{"state", "consumed", "duplicates", "rejected", "nodes", "recent_rejects"} {
			require.Contains(t, status, k)
		}
		text := h.ok("sources", "get", "publishing")
		require.Regexp(t, `^publishing \(amqp, queue cli-src-content on rabbit\): \w+\n  consumed \d+, duplicates \d+, rejected \d+, pending `, text)
		require.Contains(t, text, "key=body.content_id version=body.payload_version")

		// --map-* change those expressions only; an empty one clears it.
		upd := h.okJSON("sources", "update", "publishing", "--map-version", "", "--map-id", "body.id", "--prefetch", "0", "--ordered=false")[0]
		require.Equal(t, map[string]any{"key": "body.content_id", "id": "body.id"}, upd["mapping"])
		require.Equal(t, float64(0), upd["prefetch"])
		require.Equal(t, false, upd["ordered"])
		require.Equal(t, false, upd["enabled"], "not given: unchanged")
		upd = h.okJSON("sources", "update", "publishing", "--no-mapping", "--tenant", "", "--queue", "cli-src-other")[0]
		require.Nil(t, upd["mapping"])
		require.NotContains(t, upd, "tenant")
		require.Equal(t, "cli-src-other", upd["queue"])
		upd = h.okJSON("sources", "update", "orders", "--durable", "", "--subject", "")[0]
		require.Equal(t, "herald", upd["durable"], "cleared: the default again")
		require.Empty(t, upd["subject"], "the filter removed")

		res := h.run("connections", "delete", "rd")
		require.Equal(t, exitAPI, res.code)
		require.Contains(t, res.stderr, "herald: conflict: ")
		require.Contains(t, res.stderr, "source jobs")
		del := h.okJSON("sources", "delete", "jobs")[0]
		require.Equal(t, true, del["deleted"])
		require.Contains(t, h.ok("sources", "delete", "sensors"), "deleted sensors")
		h.ok("connections", "delete", "rd")

		// API errors come back as the API says them.
		res = h.run("sources", "create", "--name", "x", "--type", "amqp", "--connection", "bus", "--queue", "q")
		require.Equal(t, exitAPI, res.code)
		require.Contains(t, res.stderr, "herald: invalid_field: ")
		require.Contains(t, res.stderr, "nats connection")
		res = h.run("sources", "create", "--name", "x", "--type", "amqp", "--connection", "rabbit", "--queue", "q", "--map-key", "body.[[")
		require.Equal(t, exitAPI, res.code)
		require.Contains(t, res.stderr, "herald: invalid_field: mapping.key")
		res = h.run("sources", "update", "orders", "--topic", "t")
		require.Equal(t, exitAPI, res.code)
		require.Contains(t, res.stderr, "topic does not apply")
		res = h.run("sources", "get", "nope")
		require.Equal(t, exitAPI, res.code)
		require.Contains(t, res.stderr, "herald: not_found: ")
		for _, args := range [][]string{
			{"sources", "create", "--name", "x", "--type", "amqp"},
			{"sources", "create", "--type", "amqp", "--connection", "rabbit"},
			{"sources", "update", "orders"},
			{"sources", "update", "orders", "--no-mapping", "--map-key", "k"},
			{"sources", "update", "orders", "--name", "y"},
			{"sources", "get"},
			{"sources", "delete"},
		} {
			r := h.run(args...)
			require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		}
	})
}

// TestShowSourceStatus: get renders the status, its nodes and the
// recent rejects readably.
func TestShowSourceStatus(t *testing.T) {
	t.Parallel()
	pending := int64(12)
	s := &client.Source{Name: "publishing", Type: "amqp", Connection: "rabbit", Queue: "content", Enabled: true, Prefetch: 64,
		Mapping: &client.SourceMapping{Key: "body.content_id"},
		Status: &client.SourceStatus{State: "consuming", Consumed: 1000, Duplicates: 3, Rejected: 2, Pending: &pending,
			LastError: "channel closed",
			Nodes: []client.SourceNodeStatus{{Node: "node-a", State: "consuming", Consumed: 1000, Duplicates: 3, Rejected: 2,
				Pending: &pending, UpdatedAt: "2026-01-01T00:00:05Z"}},
			RecentRejects: []client.SourceReject{{At: "2026-01-01T00:00:04Z", Node: "node-a", Reason: "not_json",
				Message: "the body is not JSON:\ninvalid character '<'", MessageID: "m-9", Excerpt: "<xml>"}}}}
	env := testEnv("")
	c := &cli{cliEnv: env}
	require.NoError(t, c.showSource(s))
	out := fmt.Sprint(env.stdout)
	require.True(t, strings.HasPrefix(out, "publishing (amqp, queue content on rabbit): consuming\n"+
		"  consumed 1000, duplicates 3, rejected 2, pending 12\n  last error: channel closed\n"), out)
	for _, want := range []string{"mapping     key=body.content_id", "prefetch    64", "node-a", "recent rejects", "not_json",
		"the body is not JSON: invalid character '<'", "m-9", "<xml>"} {
		require.Contains(t, out, want)
	}
	// Unknown backlog and no node yet.
	s.Status = &client.SourceStatus{State: "idle"}
	env = testEnv("")
	c = &cli{cliEnv: env}
	require.NoError(t, c.showSource(s))
	out = fmt.Sprint(env.stdout)
	require.Contains(t, out, "rejected 0, pending unknown")
	require.NotContains(t, out, "recent rejects")
	require.NotContains(t, out, "NODE")
}
