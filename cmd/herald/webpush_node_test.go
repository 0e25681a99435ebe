package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWebPushNodeLibrary sends with the npm web-push library (aes128gcm +
// VAPID) to a herald endpoint and receives with a `ws` user agent that
// decrypts with http_ece: e2e/push-node/send-and-receive.js. .ci/run
// installs the packages (npm ci); elsewhere the test skips, visibly, until
// `npm ci` ran in e2e/push-node.
func TestWebPushNodeLibrary(t *testing.T) {
	dir, err := filepath.Abs("../../e2e/push-node")
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	if err != nil || !exists(filepath.Join(dir, "node_modules", "web-push")) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or e2e/push-node/node_modules is missing (CI=true: .ci/run runs npm ci there): %v", err)
		}
		t.Skip("SKIP: run `npm ci` in e2e/push-node (and have Node.js) to test with the npm web-push library")
	}
	bin := heraldBinary(t)
	addr := freeAddr(t)
	startNode(t, bin, addr, "--data-dir", t.TempDir(), "--dev", "--api-token", "test-token")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "send-and-receive.js", "ws://"+addr+"/")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.HasPrefix(strings.TrimSpace(string(out)), "OK "), "%s", out)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
