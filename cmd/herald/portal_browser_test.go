package main

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
)

// TestPortalBrowser drives the consumer portal in headless Chromium
// (e2e/ui/portal.mjs) against the real binary on both stores: a link made
// with `herald portal create` opens tenant acme's portal, which does every
// portal task (create, reveal, rotate, test, edit, disable a subscription;
// read attempts and retry a delivery; redrive a dead letter; read events)
// while tenant globex's pages and data, and the admin routes, stay out of
// reach — in the browser and through the API with the session. The same
// link opened again and an expired link are refused; a page on a port
// listed in --portal-frame-ancestors embeds the portal, one not listed
// cannot. Skips like TestDashboardBrowser without a browser, never under
// CI=true.
func TestPortalBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a browser")
	}
	t.Parallel()
	node, dir := needChromium(t)
	bin := heraldBinary(t)
	artifacts := os.Getenv("HERALD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	allowed, blocked := newEmbedder(t), newEmbedder(t)

	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			const token = "portal-e2e-token"
			args := []string{"--dev", "--api-token", token, "--tiers", "0s,200ms,400ms", "--poll-interval", "50ms",
				"--portal-frame-ancestors", allowed.URL}
			if backend == "postgres" {
				schema := testdb.PostgresSchema(t)
				args = append(args, "--database-url", testdb.URL()+sep(testdb.URL())+"search_path="+schema)
			} else {
				args = append(args, "--data-dir", t.TempDir())
			}
			addr := freeAddr(t)
			startNode(t, bin, addr, args...)
			recv := newFailingReceiver(t)

			shots := filepath.Join(artifacts, "portal-"+backend)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "portal.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(),
				"HERALD_URL=http://"+addr, "HERALD_TOKEN="+token, "HERALD_BIN="+bin,
				"RECEIVER_URL="+recv.URL, "SHOTS="+shots, "CHROMIUM="+chromiumPath,
				"EMBED_ALLOWED_URL="+allowed.URL, "EMBED_BLOCKED_URL="+blocked.URL)
			out, err := cmd.CombinedOutput()
			t.Logf("screenshots: %s", shots)
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "\nOK ", "%s", out)
		})
	}
}

// newEmbedder serves a page embedding ?src= in an iframe: the platform's
// own app, on another origin (127.0.0.1, another port).
func newEmbedder(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Example app</title><h1>Example app</h1>`+
			`<iframe src="%s" width="1100" height="700" title="Webhooks"></iframe>`, html.EscapeString(r.URL.Query().Get("src")))
	}))
	t.Cleanup(srv.Close)
	return srv
}
