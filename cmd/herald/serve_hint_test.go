package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeDashboardHint: serve says once, at INFO, where the dashboard is
// and how to sign in, naming the token file only when herald wrote one.
func TestServeDashboardHint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			env = append(env, kv)
		}
	}
	hint := func(t *testing.T, args ...string) (addr, logs string) {
		t.Helper()
		addr = freeAddr(t)
		out := &syncBuffer{}
		cmd := exec.Command(bin, append([]string{"serve", "--listen", addr}, args...)...)
		cmd.Env = slices.Concat(env, []string{"HERALD_LOG_LEVEL=info"}) // env is shared by parallel subtests
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		require.Eventually(t, func() bool { return strings.Contains(out.String(), "herald serving") }, 30*time.Second, 20*time.Millisecond, "logs:\n%s", out)
		time.Sleep(100 * time.Millisecond) // anything logged right after
		logs = out.String()
		require.Equal(t, 1, strings.Count(logs, "dashboard: "), logs)
		return addr, logs
	}
	t.Run("token file", func(t *testing.T) {
		t.Parallel()
		dataDir := t.TempDir()
		addr, logs := hint(t, "--data-dir", dataDir)
		require.Contains(t, logs, "dashboard: http://"+addr+"/ui/ — sign in with the token in "+filepath.Join(dataDir, "admin.token"))
	})
	t.Run("api token", func(t *testing.T) {
		t.Parallel()
		addr, logs := hint(t, "--data-dir", t.TempDir(), "--api-token", "hrld_test-token-for-the-hint-0123456789")
		require.Contains(t, logs, "dashboard: http://"+addr+"/ui/ — sign in with the --api-token value")
		require.NotContains(t, logs, "admin.token")
	})
}

// TestServePortInUse: an occupied --listen address fails before serve
// creates anything (data directory, store, admin token) and says which
// flag picks another address.
func TestServePortInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	dataDir := filepath.Join(t.TempDir(), "herald-data")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(bin, "serve", "--listen", ln.Addr().String(), "--data-dir", dataDir)
	cmd.Env = env
	out, _ := cmd.CombinedOutput()
	require.Equal(t, exitAPI, cmd.ProcessState.ExitCode(), string(out))
	require.Contains(t, string(out), "address already in use")
	require.Contains(t, string(out), "choose a free address with --listen")
	_, err = os.Stat(dataDir)
	require.True(t, os.IsNotExist(err), "serve created %s before failing to listen", dataDir)
}
