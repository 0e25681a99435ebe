package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/seal"
)

func vapidPublicKey(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/webpush/vapid-public-key")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var key struct {
		PublicKey string `json:"public_key"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&key))
	require.Len(t, key.PublicKey, 87)
	return key.PublicKey
}

// TestWebPushVAPIDKey on the real binary and both stores: the key is
// generated on the first start, kept across restarts and shared by nodes
// on one PostgreSQL database, and herald webpush rotate-vapid replaces it
// beside a serving node, which answers the new key at once.
func TestWebPushVAPIDKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			bin := heraldBinary(t)
			key, err := seal.GenerateKey()
			require.NoError(t, err)
			storeArgs := []string{"--data-dir", t.TempDir(), "--encryption-key", key}
			if backend == "postgres" {
				schema := testdb.PostgresSchema(t)
				storeArgs = append(storeArgs, "--database-url", testdb.URL()+sep(testdb.URL())+"search_path="+schema)
			}
			args := append([]string{"--dev", "--api-token", "tok", "--push=false"}, storeArgs...)
			addr := freeAddr(t)
			n := startNode(t, bin, addr, args...)
			first := vapidPublicKey(t, addr)

			if backend == "postgres" {
				// A second node on the same database signs with the same key.
				addr2 := freeAddr(t)
				startNode(t, bin, addr2, append([]string{"--node-id", "second"}, args...)...)
				require.Equal(t, first, vapidPublicKey(t, addr2))
			}

			out, err := exec.Command(bin, append([]string{"webpush", "rotate-vapid"}, storeArgs...)...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			rotated := vapidPublicKey(t, addr)
			require.NotEqual(t, first, rotated)
			require.Contains(t, string(out), "new VAPID public key: "+rotated)
			require.Contains(t, string(out), "must subscribe again")

			// Kept across a restart.
			n.kill9(t)
			startNode(t, bin, addr, args...)
			require.Equal(t, rotated, vapidPublicKey(t, addr))
		})
	}
}

func TestWebPushCLIErrors(t *testing.T) {
	t.Parallel()
	bin := heraldBinary(t)
	out, err := exec.Command(bin, "webpush", "rotate-vapid", "--data-dir", t.TempDir()).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "no herald database in --data-dir")
	out, err = exec.Command(bin, "webpush").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "rotate-vapid")
	// Refused before listening (a timeout guards against a serving node).
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err = exec.CommandContext(ctx, bin, "serve", "--vapid-subject", "ops@example.com", "--data-dir", t.TempDir(),
		"--listen", freeAddr(t)).CombinedOutput()
	require.Error(t, err)
	require.True(t, strings.Contains(string(out), "--vapid-subject"), "%s", out)
}

func TestValidVAPIDSubject(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"mailto:ops@example.com", "https://example.com/contact", "mailto:admin@localhost"} {
		require.NoError(t, validVAPIDSubject(ok), ok)
	}
	for _, bad := range []string{"", "ops@example.com", "mailto:", "http://example.com", "https://"} {
		require.Error(t, validVAPIDSubject(bad), bad)
	}
}
