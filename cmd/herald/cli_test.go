package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The client commands run in-process (runClient, as main does) against a
// real herald serve subprocess; TestCLIProcess runs the binary itself for
// the exit codes and the publish contract other tests rely on.

const cliToken = "cli-test-token"

type cliHarness struct {
	t      *testing.T
	server string
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// setupCLI starts a node on backend (sqlite or postgres) with short tiers
// and a fixed token.
func setupCLI(t *testing.T, backend string, extra ...string) *cliHarness {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := heraldBinary(t)
	args := []string{"--dev", "--api-token", cliToken, "--tiers", "0s,100ms", "--poll-interval", "50ms"}
	args = append(append(args, extra...), storeArgs(t, backend)...)
	addr := freeAddr(t)
	startNode(t, bin, addr, args...)
	return &cliHarness{t: t, server: "http://" + addr}
}

// forBackends runs fn on both stores as parallel subtests.
func forBackends(t *testing.T, fn func(t *testing.T, h *cliHarness)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			fn(t, setupCLI(t, backend))
		})
	}
}

func testEnv(stdin string) *cliEnv {
	return &cliEnv{stdin: strings.NewReader(stdin), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{},
		getenv: func(string) string { return "" }}
}

// run runs a client command with --server and --token appended.
func (h *cliHarness) run(args ...string) cliResult {
	h.t.Helper()
	return h.runEnv(context.Background(), testEnv(""), args...)
}

func (h *cliHarness) runEnv(ctx context.Context, env *cliEnv, args ...string) cliResult {
	h.t.Helper()
	args = append(args, "--server", h.server, "--token", cliToken)
	err := runClient(ctx, args, env)
	if err != nil {
		printError(env.stderr, err)
	}
	return cliResult{stdout: fmt.Sprint(env.stdout), stderr: fmt.Sprint(env.stderr), code: exitCode(err)}
}

// ok runs a command that must succeed.
func (h *cliHarness) ok(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	require.Equal(h.t, 0, r.code, "herald %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	return r.stdout
}

// okJSON runs a command with --json and parses its lines.
func (h *cliHarness) okJSON(args ...string) []map[string]any {
	h.t.Helper()
	return jsonLines(h.t, h.ok(append(args, "--json")...))
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not a JSON object: %q", line)
		out = append(out, m)
	}
	return out
}

// receiver answers every request with status (200 until changed).
type receiver struct {
	*httptest.Server
	status atomic.Int32
	hits   atomic.Int32
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.status.Store(http.StatusOK)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.hits.Add(1)
		w.WriteHeader(int(r.status.Load()))
	}))
	t.Cleanup(r.Close)
	return r
}

// noTerminalOutput asserts stderr holds no progress bar: no carriage
// return, no escape sequence.
func noTerminalOutput(t *testing.T, stderr string) {
	t.Helper()
	require.NotContains(t, stderr, "\r")
	require.NotContains(t, stderr, "\x1b")
}

func TestCLISubscriptions(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		recv := newReceiver(t)
		created := h.okJSON("subscriptions", "create", "--url", recv.URL+"/hook", "--event-types", "order.*, user.created",
			"--filter-cel", "data.total > 10", "--header", "X-Team=billing", "--header", "X-Env=test", "--ordering", "fifo",
			"--rate-limit-max", "50", "--timeout-ms", "2500", "--description", "orders", "--metadata", `{"owner":"ops"}`)
		require.Len(t, created, 1)
		sub := created[0]
		id := sub["id"].(string)
		require.Regexp(t, `^whsec_`, sub["secret"])
		require.Equal(t, []any{"order.*", "user.created"}, sub["event_types"])
		require.Equal(t, map[string]any{"cel": "data.total > 10"}, sub["filter"])
		require.Equal(t, map[string]any{"X-Team": "billing", "X-Env": "test"}, sub["headers"])
		require.Equal(t, map[string]any{"max": float64(50), "per_seconds": float64(1)}, sub["rate_limit"])
		require.Equal(t, float64(2500), sub["timeout_ms"])
		require.Equal(t, "fifo", sub["ordering"])
		require.Equal(t, map[string]any{"owner": "ops"}, sub["metadata"])

		// Human output shows the secret once and says so.
		r := h.run("subscriptions", "create", "--url", recv.URL, "--filter-jmespath", "data.ok")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "jmespath: data.ok")
		require.Contains(t, r.stdout, "whsec_")
		require.Contains(t, r.stderr, "shown only now")

		list := h.okJSON("subscriptions", "list")
		require.Len(t, list, 2)
		require.Len(t, h.okJSON("subscriptions", "list", "--limit", "1"), 1)
		require.Contains(t, h.ok("subscriptions", "list"), id)

		got := h.okJSON("subscriptions", "get", id)[0]
		require.Equal(t, id, got["id"])
		require.NotContains(t, got, "secret")

		// update sends only the flags given: a merge patch.
		upd := h.okJSON("subscriptions", "update", id, "--description", "orders v2", "--header", "X-Env=", "--no-rate-limit", "--state", "disabled")[0]
		require.Equal(t, "orders v2", upd["description"])
		require.Equal(t, map[string]any{"X-Team": "billing"}, upd["headers"])
		require.Nil(t, upd["rate_limit"])
		require.Equal(t, "disabled", upd["state"])
		require.Equal(t, recv.URL+"/hook", upd["url"], "fields not given keep their value")
		require.Equal(t, map[string]any{"cel": "data.total > 10"}, upd["filter"])
		upd = h.okJSON("subscriptions", "update", id, "--state", "enabled", "--no-filter")[0]
		require.Nil(t, upd["filter"])
		r = h.run("subscriptions", "update", id)
		require.Equal(t, exitUsage, r.code, "nothing to change")

		// Secrets: read, rotate (shown once), both listed with an expiry.
		sec := h.okJSON("subscriptions", "secret", id)[0]
		require.Equal(t, sub["secret"], sec["secret"])
		rot := h.okJSON("subscriptions", "rotate-secret", id, "--grace-period-s", "60")[0]
		require.NotEqual(t, sub["secret"], rot["secret"])
		require.Len(t, rot["secrets"], 2)
		require.Contains(t, h.ok("subscriptions", "secret", id), rot["secret"].(string))

		// test --wait waits for the attempt and shows it.
		d := h.okJSON("subscriptions", "test", id, "--wait", "--data", `{"hello":"world"}`)[0]
		require.Equal(t, "delivered", d["state"])
		attempts := d["attempts"].([]any)
		require.Len(t, attempts, 1)
		require.Equal(t, float64(200), attempts[0].(map[string]any)["status"])
		require.Equal(t, int32(1), recv.hits.Load())
		q := h.okJSON("subscriptions", "test", id)[0]
		require.Regexp(t, `^dlv_`, q["delivery_id"])
		out := h.ok("subscriptions", "test", id, "--wait")
		require.Contains(t, out, "delivered")
		require.Contains(t, out, "webhook-signature:")

		// A failing endpoint: the attempt is shown and the exit code says so.
		recv.status.Store(http.StatusInternalServerError)
		r = h.run("subscriptions", "test", id, "--wait", "--json")
		require.Equal(t, exitAPI, r.code, r.stderr)
		failed := jsonLines(t, r.stdout)[0]
		require.Equal(t, float64(500), failed["attempts"].([]any)[0].(map[string]any)["status"])
		require.Contains(t, r.stderr, "500 http_status")

		del := h.okJSON("subscriptions", "delete", id)[0]
		require.Equal(t, true, del["deleted"])
		r = h.run("subscriptions", "get", id)
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, fmt.Sprintf("herald: not_found: subscription %q not found", id))

		// An API validation error is shown as the API says it.
		r = h.run("subscriptions", "create", "--url", "ftp://x")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: invalid_field: ")
		r = h.run("subscriptions", "create", "--url", recv.URL, "--filter-cel", "data.(")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: invalid_filter: ")
		// Usage errors never reach the server.
		for _, args := range [][]string{
			{"subscriptions", "create"},
			{"subscriptions", "create", "--url", recv.URL, "--filter-cel", "x", "--filter-jmespath", "y"},
			{"subscriptions", "create", "--url", recv.URL, "--metadata", "{"},
			{"subscriptions", "create", "--url", recv.URL, "--timeout-ms", "soon"},
			{"subscriptions", "get"},
			{"subscriptions", "frobnicate"},
			{"subscriptions", "list", "--bogus"},
		} {
			r := h.run(args...)
			require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		}
	})
}

func TestCLIEventsAndDeliveries(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		recv := newReceiver(t)
		sub := h.okJSON("subscriptions", "create", "--url", recv.URL, "--event-types", "order.*")[0]
		subID := sub["id"].(string)

		// The publish contract: exactly the API's answer on one line.
		out := h.ok("events", "publish", "--type", "order.created", "--data", `{"total":12}`, "--key", "c-1", "--id", "ord-1", "--json")
		require.Equal(t, `{"id":"ord-1","duplicate":false,"deliveries":1}`+"\n", out)
		out = h.ok("events", "publish", "--type", "order.created", "--data", `{"total":12}`, "--id", "ord-1", "--json")
		require.Equal(t, `{"id":"ord-1","duplicate":true,"deliveries":1}`+"\n", out)
		// A duplicate says plainly that nothing was sent.
		require.Equal(t, "duplicate: ord-1 was already published; nothing was sent (the first publish went to 1 subscription(s))\n",
			h.ok("events", "publish", "--type", "order.created", "--data", `{"total":12}`, "--id", "ord-1"))
		require.Contains(t, h.ok("events", "publish", "--type", "user.signed_up"), "to 0 subscription(s)")
		require.Equal(t, exitUsage, h.run("events", "publish", "--type", "x", "--data", "{nope").code)
		require.Equal(t, exitUsage, h.run("events", "publish").code)

		ev := h.okJSON("events", "get", "ord-1")[0]
		require.Equal(t, "order.created", ev["type"])
		require.Equal(t, "c-1", ev["key"])
		dlvs := ev["deliveries"].([]any)
		require.Len(t, dlvs, 1)
		dlvID := dlvs[0].(map[string]any)["id"].(string)
		require.Contains(t, h.ok("events", "get", "ord-1"), dlvID)

		list := h.okJSON("events", "list", "--type", "order.created")
		require.Len(t, list, 1)
		require.Equal(t, "ord-1", list[0]["id"])
		require.Len(t, h.okJSON("events", "list", "--type", "order.*"), 1) // the globs subscriptions take
		require.Len(t, h.okJSON("events", "list", "--since", "1h"), 2)
		require.Empty(t, h.okJSON("events", "list", "--key", "nobody"))
		require.Equal(t, exitUsage, h.run("events", "list", "--since", "yesterday").code)

		// The delivery finishes; list, get and retry it.
		require.Eventually(t, func() bool {
			d := h.okJSON("deliveries", "get", dlvID)[0]
			return d["state"] == "delivered"
		}, 20*time.Second, 20*time.Millisecond)
		dl := h.okJSON("deliveries", "list", "--subscription-id", subID, "--state", "delivered")
		require.Len(t, dl, 1)
		require.Equal(t, dlvID, dl[0]["id"])
		require.Len(t, h.okJSON("deliveries", "list", "--event-id", "ord-1"), 1)
		require.Empty(t, h.okJSON("deliveries", "list", "--state", "dead"))
		r := h.run("deliveries", "list", "--state", "lost")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: invalid_field: state must be one of")
		d := h.okJSON("deliveries", "get", dlvID)[0]
		attempts := d["attempts"].([]any)
		require.Len(t, attempts, 1)
		sent := attempts[0].(map[string]any)["request_headers"].(map[string]any)
		require.Equal(t, "v1,***", sent["webhook-signature"], "the stored request headers, signature redacted")
		require.NotContains(t, attempts[0], "request", "no rebuild for an attempt that stored its headers")
		human := h.ok("deliveries", "get", dlvID)
		require.Contains(t, human, "delivered")
		require.Contains(t, human, "STATUS")
		require.Contains(t, human, "last request headers (as sent):")
		require.Contains(t, human, "webhook-signature:")
		retried := h.okJSON("deliveries", "retry", dlvID)[0]
		require.Equal(t, "pending", retried["state"])
		require.Eventually(t, func() bool { return recv.hits.Load() == 2 }, 20*time.Second, 10*time.Millisecond)

		// filters test
		ft := h.okJSON("filters", "test", "--filter-cel", "data.total > 10", "--event-types", "order.*", "--type", "order.created", "--data", `{"total":11}`)[0]
		require.Equal(t, map[string]any{"matched": true, "type_matched": true, "filter_matched": true}, ft)
		ft = h.okJSON("filters", "test", "--filter-jmespath", "data.ok", "--type", "x", "--data", `{"ok":false}`)[0]
		require.Equal(t, false, ft["matched"])
		require.Contains(t, h.ok("filters", "test", "--type", "x"), "matched: yes")
		r = h.run("filters", "test", "--filter-cel", "data.(", "--type", "x")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: invalid_filter: ")

		// stats
		st := h.okJSON("stats")[0]
		require.Len(t, st["tiers"], 2)
		require.Contains(t, h.ok("stats"), "delivered")
		ss := h.okJSON("stats", "--subscriptions")
		require.NotEmpty(t, ss)
		require.Equal(t, subID, ss[0]["subscription_id"])
		require.Contains(t, h.ok("stats", "--subscriptions"), subID)
	})
}

func TestCLIPublishFile(t *testing.T) {
	t.Parallel()
	h := setupCLI(t, "sqlite")
	recv := newReceiver(t)
	h.ok("subscriptions", "create", "--url", recv.URL, "--event-types", "bulk.*")
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, `{"id":"bulk-%d","type":"bulk.item","data":{"i":%d}}`+"\n", i, i)
		if i == 10 {
			b.WriteString("\n")                         // blank lines are skipped
			b.WriteString("not json\n")                 // rejected locally
			b.WriteString(`{"type":"herald.x"}` + "\n") // rejected by the API
		}
	}
	path := filepath.Join(t.TempDir(), "events.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))

	r := h.run("events", "publish", "--file", path, "--batch-size", "7", "--json")
	require.Equal(t, exitAPI, r.code, "rejected lines fail the command: %s", r.stderr)
	require.Equal(t, `{"error":{"code":"error","message":"2 of 32 events rejected"}}`+"\n", r.stderr) // --json: errors are JSON too
	noTerminalOutput(t, r.stderr)
	lines := jsonLines(t, r.stdout)
	require.Len(t, lines, 32)
	statuses := map[string]int{}
	for i, l := range lines {
		require.Equal(t, float64(i), l["index"], "results in file order")
		statuses[l["status"].(string)]++
	}
	require.Equal(t, map[string]int{"accepted": 30, "rejected": 2}, statuses)
	require.Equal(t, "invalid_json", lines[11]["error"].(map[string]any)["code"])
	require.Equal(t, "invalid_field", lines[12]["error"].(map[string]any)["code"])
	require.True(t, strings.HasPrefix(lines[12]["error"].(map[string]any)["message"].(string), "type is reserved"), "no batch-call index in the message")

	// Again from stdin, human output: every event a duplicate now.
	env := testEnv(b.String())
	r = h.runEnv(context.Background(), env, "events", "publish", "--file", "-")
	require.Equal(t, exitAPI, r.code)
	require.Contains(t, r.stdout, "32 events: 0 accepted, 30 duplicate, 2 rejected")
	require.Contains(t, r.stderr, "line 13: invalid_json")
	require.Contains(t, r.stderr, "line 14: invalid_field: type is reserved") // the file's line, not the index in its batch
	require.NotContains(t, r.stderr, "events[")
	noTerminalOutput(t, r.stderr)
	require.Len(t, h.okJSON("events", "list", "--type", "bulk.item", "--limit", "0"), 30)

	// On a terminal the bar counts events (32 non-blank lines), not bytes.
	env = testEnv("")
	env.stderrTTY = true
	r = h.runEnv(context.Background(), env, "events", "publish", "--file", path)
	require.Equal(t, exitAPI, r.code)
	require.Contains(t, r.stderr, "publishing events [")
	require.Contains(t, r.stderr, "100% 32/32\n")
	require.NotContains(t, r.stderr, "MiB")
	require.Equal(t, exitUsage, h.run("events", "publish", "--file", path, "--type", "x").code)
	require.Equal(t, exitUsage, h.run("events", "publish", "--file", filepath.Join(t.TempDir(), "missing")).code)
}

func TestCLIRedrive(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		recv := newReceiver(t)
		recv.status.Store(http.StatusServiceUnavailable)
		subID := h.okJSON("subscriptions", "create", "--url", recv.URL, "--event-types", "order.*")[0]["id"].(string)
		for i := range 12 {
			h.ok("events", "publish", "--type", "order.created", "--data", fmt.Sprintf(`{"i":%d}`, i))
		}
		require.Eventually(t, func() bool {
			g := h.okJSON("dead-letters", "list", "--subscription-id", subID)
			return len(g) == 1 && g[0]["count"] == float64(12)
		}, 30*time.Second, 20*time.Millisecond)
		g := h.okJSON("dead-letters", "list")[0]
		require.Equal(t, "http_status", g["error"])
		require.Contains(t, h.ok("dead-letters", "list"), "http_status")

		dry := h.okJSON("dead-letters", "redrive", "--subscription-id", subID, "--dry-run")[0]
		require.Equal(t, map[string]any{"redriven": float64(0), "matched": float64(12), "remaining": float64(12)}, dry)
		// No terminal and no --yes: refused before anything changes.
		r := h.run("dead-letters", "redrive", "--subscription-id", subID)
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "--yes")
		// A terminal that answers no.
		env := testEnv("n\n")
		env.stdinTTY = true
		r = h.runEnv(context.Background(), env, "dead-letters", "redrive", "--subscription-id", subID)
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "Redrive 12 dead letter(s) of "+subID+"? [y/N]")
		require.Len(t, h.okJSON("deliveries", "list", "--state", "dead"), 12, "nothing changed")

		// Yes, in batches of 5: three calls until remaining is 0.
		recv.status.Store(http.StatusOK)
		env = testEnv("y\n")
		env.stdinTTY = true
		r = h.runEnv(context.Background(), env, "dead-letters", "redrive", "--subscription-id", subID, "--batch-size", "5", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		noTerminalOutput(t, r.stderr)
		require.Equal(t, []map[string]any{{"redriven": float64(12), "matched": float64(12), "remaining": float64(0)}}, jsonLines(t, r.stdout))
		require.Eventually(t, func() bool {
			return len(h.okJSON("deliveries", "list", "--state", "delivered")) == 12
		}, 30*time.Second, 20*time.Millisecond)
		require.Contains(t, h.ok("dead-letters", "redrive", "--subscription-id", subID, "--yes"), "0 dead letter(s) match")
		r = h.run("dead-letters", "redrive", "--subscription-id", "sub_nope", "--yes")
		require.Equal(t, exitAPI, r.code)
		require.Contains(t, r.stderr, "herald: not_found: ")
		require.Equal(t, exitUsage, h.run("dead-letters", "redrive", "--yes").code)
		require.Equal(t, exitUsage, h.run("dead-letters", "redrive", "--subscription-id", subID, "--batch-size", "0").code)
	})
}

func TestCLITail(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, h *cliHarness) {
		recv := newReceiver(t)
		subID := h.okJSON("subscriptions", "create", "--url", recv.URL, "--event-types", "order.*")[0]["id"].(string)
		h.ok("events", "publish", "--type", "order.created", "--id", "before-tail")
		// Finished before the tail starts (the outcome commits just after
		// the receiver answered): a state change would be shown.
		require.Eventually(t, func() bool {
			return len(h.okJSON("deliveries", "list", "--event-id", "before-tail", "--state", "delivered")) == 1
		}, 20*time.Second, 10*time.Millisecond)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &syncBuffer{}
		errOut := &syncBuffer{}
		env := testEnv("")
		env.stdout, env.stderr = out, errOut
		done := make(chan cliResult, 1)
		go func() {
			done <- h.runEnv(ctx, env, "tail", "--subscription-id", subID, "--interval", "20ms", "--json")
		}()
		// Once the tail has begun, publish and watch the new delivery
		// reach delivered.
		require.Eventually(t, func() bool { return strings.Contains(errOut.String(), "following deliveries") },
			10*time.Second, 10*time.Millisecond)
		h.ok("events", "publish", "--type", "order.created", "--id", "after-tail")
		require.Eventually(t, func() bool {
			for _, l := range jsonLines(t, out.String()) {
				if l["event_id"] == "after-tail" && l["state"] == "delivered" {
					return true
				}
			}
			return false
		}, 20*time.Second, 20*time.Millisecond, "tail printed: %s", out.String())
		cancel()
		res := <-done
		require.Equal(t, exitInterrupted, res.code, res.stderr)
		for _, l := range jsonLines(t, out.String()) {
			require.NotEqual(t, "before-tail", l["event_id"], "only new deliveries by default")
			require.Equal(t, subID, l["subscription_id"])
		}

		// --since shows older ones too; human lines.
		ctx2, cancel2 := context.WithCancel(context.Background())
		out2 := &syncBuffer{}
		env2 := testEnv("")
		env2.stdout = out2
		done2 := make(chan cliResult, 1)
		go func() {
			done2 <- h.runEnv(ctx2, env2, "tail", "--since", "1h", "--state", "delivered", "--interval", "20ms")
		}()
		require.Eventually(t, func() bool {
			s := out2.String()
			return strings.Contains(s, "event=before-tail") && strings.Contains(s, "event=after-tail")
		}, 20*time.Second, 20*time.Millisecond)
		cancel2()
		require.Equal(t, exitInterrupted, (<-done2).code)
	})
}

// TestCLITailAttempts: a delivery that fails twice, then succeeds, shows
// three attempt lines — with their tiers, outcomes, the event type and the
// webhook's URL — even when all three fall between two polls.
func TestCLITailAttempts(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := setupCLI(t, backend, "--tiers", "0s,50ms,50ms")
			var hits atomic.Int32
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if hits.Add(1) <= 2 {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			t.Cleanup(recv.Close)
			subID := h.okJSON("subscriptions", "create", "--url", recv.URL+"/hook", "--event-types", "order.*")[0]["id"].(string)

			run := func(ctx context.Context, asJSON bool, out, errOut *syncBuffer) chan cliResult {
				env := testEnv("")
				env.stdout, env.stderr = out, errOut
				args := []string{"tail", "--subscription-id", subID, "--interval", "2s"}
				if asJSON {
					args = append(args, "--json")
				}
				done := make(chan cliResult, 1)
				go func() { done <- h.runEnv(ctx, env, args...) }()
				require.Eventually(t, func() bool { return strings.Contains(errOut.String(), "following deliveries") },
					10*time.Second, 10*time.Millisecond)
				return done
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out, errOut := &syncBuffer{}, &syncBuffer{}
			done := run(ctx, false, out, errOut)
			jout, jerr := &syncBuffer{}, &syncBuffer{}
			jdone := run(ctx, true, jout, jerr)
			h.ok("events", "publish", "--type", "order.created", "--id", "flaky")
			want := []string{
				`pending    attempt=1 tier=0 503 http_status  order.created → ` + recv.URL + `/hook  sub=` + subID + ` event=flaky`,
				`pending    attempt=2 tier=1 503 http_status  order.created → ` + recv.URL + `/hook  sub=` + subID + ` event=flaky`,
				`delivered  attempt=3 tier=2 200  order.created → ` + recv.URL + `/hook  sub=` + subID + ` event=flaky`,
			}
			require.Eventually(t, func() bool { return strings.Contains(out.String(), "delivered") },
				20*time.Second, 20*time.Millisecond, "tail printed: %s", out.String())
			require.Eventually(t, func() bool { return strings.Contains(jout.String(), `"delivered"`) },
				20*time.Second, 20*time.Millisecond, "tail --json printed: %s", jout.String())
			cancel()
			require.Equal(t, exitInterrupted, (<-done).code)
			require.Equal(t, exitInterrupted, (<-jdone).code)

			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if strings.Contains(l, "attempt=") {
					got = append(got, l)
				}
			}
			require.Len(t, got, 3, out.String())
			for i, l := range got {
				require.Contains(t, l, want[i])
			}
			var attempts []map[string]any
			for _, l := range jsonLines(t, jout.String()) {
				if a, ok := l["attempt"].(map[string]any); ok {
					require.Equal(t, "order.created", l["event_type"])
					require.Equal(t, recv.URL+"/hook", l["destination"])
					attempts = append(attempts, a)
				}
			}
			require.Len(t, attempts, 3, jout.String())
			for i, a := range attempts {
				require.Equal(t, float64(i+1), a["n"])
				require.Equal(t, float64(i), a["tier"])
			}
			require.Equal(t, "http_status", attempts[1]["error"])
			require.Equal(t, float64(200), attempts[2]["status"])
		})
	}
}

func TestCLIProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	dataDir := t.TempDir()
	addr := freeAddr(t)
	startNode(t, bin, addr, "--dev", "--data-dir", dataDir, "--poll-interval", "50ms")
	server := "http://" + addr
	token, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	require.NoError(t, err)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			env = append(env, kv)
		}
	}
	herald := func(extraEnv []string, args ...string) cliResult {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(env, extraEnv...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return cliResult{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
	}

	// The contract the dashboard's browser test relies on.
	r := herald(nil, "events", "publish", "--server", server, "--token", strings.TrimSpace(string(token)),
		"--type", "order.created", "--data", `{"n":1}`, "--key", "k", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, regexp.MustCompile(`^\{"id":"evt_[0-9a-z]+","duplicate":false,"deliveries":0\}\n$`), r.stdout)

	// The token from <data-dir>/admin.token for a local server, from the
	// flag or HERALD_DATA_DIR; the server from HERALD_URL.
	r = herald(nil, "subscriptions", "list", "--server", server, "--data-dir", dataDir, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	r = herald([]string{"HERALD_URL=" + server, "HERALD_DATA_DIR=" + dataDir}, "events", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, jsonLines(t, r.stdout), 1)
	r = herald([]string{"HERALD_URL=" + server, "HERALD_TOKEN=wrong"}, "stats")
	require.Equal(t, exitAPI, r.code)
	require.Contains(t, r.stderr, "herald: unauthorized: ")
	// A refused token says where it was read from.
	require.Contains(t, r.stderr, "(read from HERALD_TOKEN)\n")
	r = herald(nil, "stats", "--server", server, "--token", "wrong")
	require.Equal(t, exitAPI, r.code)
	require.Contains(t, r.stderr, "(read from --token)\n")
	staleDir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(staleDir, "admin.token"), "hrld_stale\n"))
	r = herald(nil, "stats", "--server", server, "--data-dir", staleDir)
	require.Equal(t, exitAPI, r.code)
	require.Contains(t, r.stderr, "(read from "+filepath.Join(staleDir, "admin.token")+")\n")

	r = herald(nil, "stats", "--server", server, "--data-dir", t.TempDir())
	require.Equal(t, exitAPI, r.code)
	require.Contains(t, r.stderr, "herald: unauthorized: ")
	require.Contains(t, r.stderr, "no token: pass --token")

	// With --json, errors are JSON on stderr too; the exit codes stay.
	r = herald(nil, "subscriptions", "get", "sub_nope", "--server", server, "--data-dir", dataDir, "--json")
	require.Equal(t, exitAPI, r.code)
	require.Empty(t, r.stdout)
	require.Equal(t, `{"error":{"code":"not_found","message":"subscription \"sub_nope\" not found"}}`+"\n", r.stderr)
	r = herald([]string{"HERALD_URL=" + server, "HERALD_TOKEN=wrong"}, "stats", "--json")
	require.Equal(t, exitAPI, r.code)
	require.Equal(t, `{"error":{"code":"unauthorized","message":"invalid, expired or revoked API token (read from HERALD_TOKEN)"}}`+"\n", r.stderr)
	r = herald(nil, "stats", "--json", "--server", "http://"+freeAddr(t))
	require.Equal(t, exitConnect, r.code)
	require.Equal(t, "cannot_connect", jsonLines(t, r.stderr)[0]["error"].(map[string]any)["code"], r.stderr)
	r = herald(nil, "events", "list", "--json", "--since", "yesterday", "--server", server, "--data-dir", dataDir)
	require.Equal(t, exitUsage, r.code)
	require.Equal(t, "usage", jsonLines(t, r.stderr)[0]["error"].(map[string]any)["code"], r.stderr)

	// Exit codes.
	r = herald(nil, "subscriptions", "get", "sub_nope", "--server", server, "--data-dir", dataDir)
	require.Equal(t, exitAPI, r.code)
	require.Equal(t, "herald: not_found: subscription \"sub_nope\" not found\n", r.stderr)
	for _, args := range [][]string{
		{"subscriptions", "list", "--bogus"},
		{"subscriptions"},
		{"nosuch"},
		{},
		{"serve", "--bogus"},
		{"receive", "--bogus"},
		{"bench", "--bogus"},
		{"migrate", "--bogus"},
		{"events", "list", "--server", "ftp://x"},
	} {
		r := herald(nil, args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
	r = herald(nil, "stats", "--server", "http://"+freeAddr(t))
	require.Equal(t, exitConnect, r.code)
	require.Contains(t, r.stderr, "herald: cannot connect to http://127.0.0.1:")
	require.Contains(t, r.stderr, "is herald running? start it with: herald serve\n")
	require.Equal(t, 0, herald(nil, "subscriptions", "list", "-h").code)

	// Help asked for is the output: stdout, exit 0 (`herald --help | less`).
	// Usage after a mistake is a diagnostic: stderr.
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"subscriptions", "list", "-h"}, {"subscriptions", "--help"}, {"deliveries", "get", "--help"},
		{"serve", "--help"}, {"migrate", "-h"}, {"receive", "--help"}, {"bench", "-h"}, {"secrets", "--help"}, {"secrets", "rotate-key", "-h"},
	} {
		r := herald(nil, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stdout, "Usage", "%v", args)
		require.Empty(t, r.stderr, "%v", args)
	}
	// migrate lists the flags it uses, not every serve flag.
	r = herald(nil, "migrate", "--help")
	require.Contains(t, r.stdout, "-database-url")
	require.Contains(t, r.stdout, "-data-dir")
	require.NotContains(t, r.stdout, "-workers")
	require.NotContains(t, r.stdout, "-listen")
	r = herald(nil, "subscriptions", "list", "--bogus")
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "Usage")
	require.NotContains(t, r.stderr, "did you mean")
	// A mistyped flag names the closest one (two edits at most), before the usage.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"subscriptions", "list", "--jsn"}, "--json"},
		{[]string{"serve", "--lisen", "x"}, "--listen"},
		{[]string{"migrate", "--data-dri", "x"}, "--data-dir"},
	} {
		r = herald(nil, tc.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		i := strings.Index(r.stderr, "(did you mean "+tc.want+"?)\n")
		require.Positive(t, i, "%v: %s", tc.args, r.stderr)
		require.Less(t, i, strings.Index(r.stderr, "Usage"), "%v: %s", tc.args, r.stderr)
	}
	r = herald(nil, "deliveries", "get", "--server", server, "--data-dir", dataDir)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "herald: deliveries get: ID is missing")
	r = herald(nil, "version")
	require.Equal(t, 0, r.code)
	require.True(t, strings.HasPrefix(r.stdout, "herald "), r.stdout)

	// tail runs until SIGINT, then exits 130.
	cmd := exec.Command(bin, "tail", "--server", server, "--data-dir", dataDir, "--interval", "20ms")
	cmd.Env = env
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "following deliveries") }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	_ = cmd.Wait()
	require.Equal(t, exitInterrupted, cmd.ProcessState.ExitCode(), stderr.String())
	// Ctrl-C is how tail ends, not an error.
	require.NotContains(t, stderr.String(), "context canceled")
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			env := testEnv("")
			require.NoError(t, runClient(context.Background(), []string{"completion", shell}, env))
			script := fmt.Sprint(env.stdout)
			for _, word := range []string{"subscriptions", "rotate-secret", "dead-letters", "redrive", "--event-types", "--filter-cel", "--batch-size", "--yes", "serve",
				"connections", "--destination-type", "--destination-connection", "--destination-push-subscription", "--tls-ca-file"} {
				require.Contains(t, script, word)
			}
			path, err := exec.LookPath(shell)
			if err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s not installed (.ci/run installs it)", shell)
				}
				t.Skipf("%s not installed; script generated but not syntax-checked", shell)
			}
			f := filepath.Join(t.TempDir(), "herald."+shell)
			require.NoError(t, os.WriteFile(f, []byte(script), 0o600))
			out, err := exec.Command(path, "-n", f).CombinedOutput()
			require.NoError(t, err, "%s -n: %s", shell, out)
			if shell != "zsh" {
				return
			}
			// Run the function with compadd replaced by a printer.
			drive := fmt.Sprintf(`compadd() { shift; print -l -- "$@"; }; source %s; words=(herald dead-letters re); CURRENT=3; _herald`, f)
			out, err = exec.Command(path, "-c", drive).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Equal(t, []string{"list", "redrive"}, strings.Fields(string(out)))
		})
	}
	// bash: the script really completes.
	env := testEnv("")
	require.NoError(t, runClient(context.Background(), []string{"completion", "bash"}, env))
	f := filepath.Join(t.TempDir(), "herald.bash")
	require.NoError(t, os.WriteFile(f, []byte(fmt.Sprint(env.stdout)), 0o600))
	for _, tc := range []struct{ words, want string }{
		{"herald subs", "subscriptions"},
		{"herald dead-letters re", "redrive"},
		{"herald subscriptions create --event-t", "--event-types"},
		{"herald tail --st", "--state"},
		{"herald deliveries list --state dea", "dead"},
		{"herald conn", "connections"},
		{"herald connections cr", "create"},
		{"herald sour", "sources"},
		{"herald sources create --map-ke", "--map-key"},
		{"herald subscriptions create --destination-con", "--destination-connection"},
		{"herald secr", "secrets"},
		{"herald secrets rot", "rotate-key"},
		{"herald secrets rotate-key --bat", "--batch"},
		{"herald serve --database-u", "--database-url"},
		{"herald migrate --encryption-key-f", "--encryption-key-file"},
	} {
		script := fmt.Sprintf(`source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _herald; echo "${COMPREPLY[*]}"`,
			f, tc.words, len(strings.Fields(tc.words))-1)
		out, err := exec.Command("bash", "-c", script).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, strings.Fields(string(out)), tc.want, "%q", tc.words)
	}
}
