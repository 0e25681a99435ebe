package main

import (
	"net/http"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeMetricsToken (issue 20, item 9): herald serve --metrics-token
// makes GET /metrics answer only that bearer.
func TestServeMetricsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	addr := freeAddr(t)
	startNode(t, bin, addr, "--data-dir", t.TempDir(), "--api-token", "api-token", "--metrics-token", "scrape-token")
	scrape := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, scrape(""))
	require.Equal(t, http.StatusUnauthorized, scrape("api-token"))
	require.Equal(t, http.StatusOK, scrape("scrape-token"))
}

// TestServeInternalListenNeedsURL (issue 20, item 8): --internal-listen on
// every address without --internal-url is refused at startup (every such
// node was http://[::]:PORT to the others).
func TestServeInternalListenNeedsURL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	out, err := exec.Command(bin, "serve", "--listen", freeAddr(t), "--data-dir", t.TempDir(), "--internal-listen", ":0").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "set --internal-url")
}
