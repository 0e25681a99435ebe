package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
)

// TestMetricsToken (issue 20, item 9): with --metrics-token, /metrics
// answers only its bearer (not the API token, not nothing); without it,
// /metrics stays open.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	b := setup(t, testdb.SQLite(t))
	b.handler = New(Config{
		Store:        b.store,
		Publisher:    ingest.New(ingest.Config{Store: b.store}),
		Auth:         NewTokenAuth(b.store, testToken),
		MetricsToken: "scrape-secret",
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "herald_up 1\n")
		}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	for _, opt := range []reqOption{withoutToken(), withToken(testToken), withToken("scrape-secreT"), withToken("scrape-secret-")} {
		r := b.do(t, http.MethodGet, "/metrics", nil, opt)
		require.Equal(t, http.StatusUnauthorized, r.code, string(r.body))
		require.Contains(t, string(r.body), `"unauthorized"`)
		require.NotContains(t, string(r.body), "herald_up")
	}
	r := b.do(t, http.MethodGet, "/metrics", nil, withToken("scrape-secret"))
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, "herald_up 1\n", string(r.body))
	// The probes stay open.
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", nil, withoutToken()).code)
}
