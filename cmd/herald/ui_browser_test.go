package main

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testbroker"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// TestDashboardBrowser drives the dashboard in headless Chromium through
// playwright-core (e2e/ui/dashboard.mjs) against the real binary on both
// stores: sign in, create a subscription and test its filter, publish
// through the CLI (`herald events publish`), watch the delivery,
// read a dead delivery's attempts, redrive it, rotate the secret, create
// a Redis source in the Sources form (field errors beside their fields)
// and follow its status, and load every page at 1280 px and at phone
// width, saving screenshots. Outside CI
// it skips, visibly, without Chromium or `npm ci` in e2e/ui; under CI=true
// it fails instead.
//
// HERALD_ARTIFACTS keeps the screenshots (default: the test's temp dir,
// logged); HERALD_UI_OVERVIEW_SHOT also saves the SQLite run's overview
// there (how docs/dashboard-overview.png is made).
func TestDashboardBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a browser")
	}
	t.Parallel()
	b := newBrowserRun(t)
	// The flow delivers to a Redis stream made in the form.
	redisURL := testbroker.URL(t, testbroker.Redis)
	// Browsers share the machine's two cores badly: the stores run one
	// after the other.
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			env := []string{"HERALD_TEST_REDIS_URL=" + redisURL}
			if p := os.Getenv("HERALD_UI_OVERVIEW_SHOT"); p != "" && backend == "sqlite" {
				env = append(env, "OVERVIEW_SHOT="+p)
			}
			b.run(t, backend, "dashboard.mjs", "ui-"+backend, nil, env...)
		})
	}
}

// TestDashboardSystemEvents drives e2e/ui/system_events.mjs on both
// stores: a stored herald.delivery.dead is left out of the Events page
// until "herald.* alerts" is ticked, and out of the filter tester's recent
// events.
func TestDashboardSystemEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a browser")
	}
	t.Parallel()
	b := newBrowserRun(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			b.run(t, backend, "system_events.mjs", "ui-system-"+backend, nil)
		})
	}
}

// TestDashboardEventTypes drives e2e/ui/event_types.mjs on both stores:
// a type created on the Event types page (a bad example refused at its
// field) is offered with its description by the subscription form, the
// portal's too, and its example by the filter tester; then the page, the
// form's picker and the portal's at 390 px.
//
// HERALD_UI_EVENT_TYPES_SHOT also saves the SQLite run's Event types page
// there (how docs/dashboard-event-types.png is made).
func TestDashboardEventTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a browser")
	}
	t.Parallel()
	b := newBrowserRun(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var env []string
			if p := os.Getenv("HERALD_UI_EVENT_TYPES_SHOT"); p != "" && backend == "sqlite" {
				env = append(env, "EVENT_TYPES_SHOT="+p)
			}
			b.run(t, backend, "event_types.mjs", "ui-event-types-"+backend, nil, env...)
		})
	}
}

// TestDashboardScopedSignIn drives e2e/ui/scoped.mjs on both stores: a
// read-only token signs in and is offered no write button and no admin
// page; a tenant token sees its tenant's banner and subscriptions only.
func TestDashboardScopedSignIn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a browser")
	}
	t.Parallel()
	b := newBrowserRun(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			b.run(t, backend, "scoped.mjs", "ui-scoped-"+backend, nil)
		})
	}
}

// browserRun runs the e2e/ui scripts against the built binary.
type browserRun struct {
	node, dir, bin string
	// artifacts is where screenshots go: $HERALD_ARTIFACTS or a temp dir.
	artifacts string
}

func newBrowserRun(t *testing.T) *browserRun {
	t.Helper()
	node, dir := needChromium(t)
	b := &browserRun{node: node, dir: dir, bin: heraldBinary(t), artifacts: os.Getenv("HERALD_ARTIFACTS")}
	if b.artifacts == "" {
		b.artifacts = t.TempDir()
	}
	return b
}

// run starts a node on backend (short tiers, --dev, a fixed admin token,
// plus args) and a receiver that can be told to fail, then runs script
// with their addresses (and env) in its environment. The script must exit
// 0 and print "OK …"; screenshots go under artifacts/shots.
func (b *browserRun) run(t *testing.T, backend, script, shots string, args []string, env ...string) {
	t.Helper()
	const token = "browser-e2e-token"
	args = append([]string{"--dev", "--api-token", token, "--tiers", "0s,200ms,400ms", "--poll-interval", "50ms"}, args...)
	args = append(args, storeArgs(t, backend)...)
	addr := freeAddr(t)
	startNode(t, b.bin, addr, args...)
	recv := newFailingReceiver(t)

	shots = filepath.Join(b.artifacts, shots)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.node, script)
	cmd.Dir = b.dir
	cmd.Env = append(os.Environ(),
		"HERALD_URL=http://"+addr, "HERALD_TOKEN="+token, "HERALD_BIN="+b.bin,
		"RECEIVER_URL="+recv.URL, "SHOTS="+shots, "CHROMIUM="+chromiumPath)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	t.Logf("screenshots: %s", shots)
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "\nOK ", "%s", out)
}

// needChromium returns node and the e2e/ui directory, or skips (visibly)
// when Node.js, playwright-core (`npm ci` in e2e/ui) or Chromium is
// missing; under CI=true it fails instead.
func needChromium(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("../../e2e/ui")
	require.NoError(t, err)
	node, nodeErr := exec.LookPath("node")
	missing := ""
	switch {
	case nodeErr != nil:
		missing = "node is not installed"
	case !exists(filepath.Join(dir, "node_modules", "playwright-core")):
		missing = "e2e/ui/node_modules is missing (run `npm ci` in e2e/ui)"
	case !exists(chromiumPath):
		missing = chromiumPath + " is missing (apt-get install chromium)"
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: .ci/run installs chromium and runs npm ci in e2e/ui)", missing)
		}
		t.Skip("SKIP: " + missing + "; the browser tests need Node.js, Chromium and playwright-core")
	}
	return node, dir
}

// newFailingReceiver answers 200 on /hook, or 503 with a body while
// POST /control?fail=1 is in force (POST /control?fail=0 ends it); /flaky
// fails one request in four.
func newFailingReceiver(t *testing.T) *httptest.Server {
	t.Helper()
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch {
		case r.URL.Path == "/control":
			failing.Store(r.URL.Query().Get("fail") == "1")
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/flaky" && rand.IntN(4) == 0:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("upstream timed out"))
		case strings.HasPrefix(r.URL.Path, "/hook") && failing.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"down for maintenance"}`))
		default:
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDashboardMount: herald serve serves the dashboard at /ui/ (and the
// portal at /portal/) and sends GET / there, while a WebSocket upgrade at /
// still reaches the push service; --ui=false turns them off.
func TestDashboardMount(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(t *testing.T, url string, header ...string) (int, http.Header) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	upgrade := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}

	on := freeAddr(t)
	startNode(t, bin, on, "--data-dir", t.TempDir(), "--api-token", "t")
	code, h := status(t, "http://"+on+"/")
	require.Equal(t, http.StatusFound, code)
	require.Equal(t, "/ui/", h.Get("Location"))
	code, h = status(t, "http://"+on+"/ui/deliveries")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, h.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	code, _ = status(t, "http://"+on+"/", upgrade...)
	require.Equal(t, http.StatusSwitchingProtocols, code, "the push WebSocket still answers at /")
	// The consumer portal: no framing without --portal-frame-ancestors.
	code, h = status(t, "http://"+on+"/portal/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, h.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Equal(t, "DENY", h.Get("X-Frame-Options"))

	off := freeAddr(t)
	startNode(t, bin, off, "--data-dir", t.TempDir(), "--api-token", "t", "--ui=false")
	code, _ = status(t, "http://"+off+"/")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = status(t, "http://"+off+"/ui/")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = status(t, "http://"+off+"/portal/")
	require.Equal(t, http.StatusNotFound, code)
}

// TestDashboardFirefox opens every dashboard page in headless Firefox ESR
// (the same firefox-esr the Web Push test uses) over WebDriver BiDi
// (e2e/ui/firefox.mjs): sign-in, each page rendered without a JavaScript,
// console or CSP error, the filter tester, and one page at phone width.
// SQLite only: the stores are TestDashboardBrowser's business.
func TestDashboardFirefox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a browser")
	}
	t.Parallel()
	ff := firefoxBinary(t)
	dir, err := filepath.Abs("../../e2e/ui")
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	if err != nil || !exists(filepath.Join(dir, "node_modules", "ws")) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or e2e/ui/node_modules is missing (CI=true: .ci/run runs npm ci there): %v", err)
		}
		t.Skip("SKIP: run `npm ci` in e2e/ui (and have Node.js) to test the dashboard in Firefox")
	}
	bin := heraldBinary(t)
	const token = "ui-ff-token"
	addr := freeAddr(t)
	startNode(t, bin, addr, "--data-dir", t.TempDir(), "--dev", "--api-token", token, "--tiers", "0s,100ms", "--poll-interval", "50ms")
	recv := newFailingReceiver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	call := func(method, path string, body any) map[string]any {
		t.Helper()
		code, b, err := apiCall(ctx, addr, token, method, path, body)
		require.NoError(t, err)
		require.Less(t, code, 300, "%s", b)
		var out map[string]any
		require.NoError(t, json.Unmarshal(b, &out), "%s", b)
		return out
	}
	sub := call(http.MethodPost, "/v1/subscriptions", map[string]any{"url": recv.URL + "/hook", "description": "Orders", "event_types": []string{"order.*"}, "filter": map[string]any{"cel": "data.total > 100"}})
	resp, err := http.Post(recv.URL+"/control?fail=1", "", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	call(http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "data": map[string]any{"total": 150}})
	var deliveryID string
	require.Eventually(t, func() bool {
		list := call(http.MethodGet, "/v1/deliveries?state=dead", nil)["data"].([]any)
		if len(list) == 0 {
			return false
		}
		deliveryID = list[0].(map[string]any)["id"].(string)
		return true
	}, 30*time.Second, 50*time.Millisecond)

	artifacts := os.Getenv("HERALD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	shots := filepath.Join(artifacts, "ui-firefox")
	cmd := exec.CommandContext(ctx, node, "firefox.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HERALD_URL=http://"+addr, "HERALD_TOKEN="+token, "FIREFOX="+ff, "SHOTS="+shots,
		"DELIVERY_ID="+deliveryID, "SUBSCRIPTION_ID="+sub["id"].(string))
	out, err := cmd.CombinedOutput()
	t.Logf("screenshots: %s", shots)
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "OK ", "%s", out)
}
