package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDebugListen: --debug-listen serves pprof on its own address, and the
// API address never does.
func TestDebugListen(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	addr, debugAddr := freeAddr(t), freeAddr(t)
	startNode(t, bin, addr, "--api-token", "debug-token", "--data-dir", t.TempDir(), "--debug-listen", debugAddr)

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("http://" + debugAddr + "/debug/pprof/cmdline")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.Contains(body, "--debug-listen"), "the node's command line: %q", body)
	code, body = get("http://" + debugAddr + "/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine profile")

	code, _ = get("http://" + addr + "/debug/pprof/cmdline")
	require.NotEqual(t, http.StatusOK, code, "the API listener does not serve pprof")
}
