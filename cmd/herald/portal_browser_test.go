package main

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"testing"
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
	b := newBrowserRun(t)
	allowed, blocked := newEmbedder(t), newEmbedder(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			b.run(t, backend, "portal.mjs", "portal-"+backend, []string{"--portal-frame-ancestors", allowed.URL},
				"EMBED_ALLOWED_URL="+allowed.URL, "EMBED_BLOCKED_URL="+blocked.URL)
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
