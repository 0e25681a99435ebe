package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/seal"
)

// TestSecretsRotateKeyUnderLoad is issue 12's encryption test on the real
// binary and both stores: secrets written under key A; the node restarted
// with B,A; herald secrets rotate-key runs (small batches) while events
// flow and secrets are rotated through the API. Every delivery arrives and
// verifies with the receiver's Standard Webhooks check; afterwards B alone
// opens everything, A alone or no key refuses to start with a clear message.
func TestSecretsRotateKeyUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			bin := heraldBinary(t)
			keyA, err := seal.GenerateKey()
			require.NoError(t, err)
			keyB, err := seal.GenerateKey()
			require.NoError(t, err)
			rawB, err := seal.ParseKey(keyB)
			require.NoError(t, err)
			idB := seal.KeyID(rawB)

			// A data directory of its own on PostgreSQL too: rotate-key
			// re-encrypts <data-dir>/push.keys.
			storeArgs := []string{"--data-dir", t.TempDir()}
			if backend == "postgres" {
				schema := testdb.PostgresSchema(t)
				storeArgs = append(storeArgs, "--database-url", testdb.URL()+sep(testdb.URL())+"search_path="+schema)
			}
			args := append([]string{"--dev", "--api-token", "tok", "--poll-interval", "50ms", "--push=false"}, storeArgs...)
			addr := freeAddr(t)
			ctx := context.Background()
			call := func(method, path string, body any) map[string]any {
				t.Helper()
				code, b, err := apiCall(ctx, addr, "tok", method, path, body)
				require.NoError(t, err)
				require.Less(t, code, 300, "%s %s: %d %s", method, path, code, b)
				var out map[string]any
				if len(b) > 0 {
					require.NoError(t, json.Unmarshal(b, &out), "%s", b)
				}
				return out
			}

			// The receiver verifies every request with the subscription's
			// first secret (rotated-out secrets keep signing for the grace
			// period, so it stays valid) and counts events per subscription.
			var (
				mu        sync.Mutex
				verifiers = map[string]*standardwebhooks.Webhook{}
				got       = map[string]map[string]bool{}
				refused   atomic.Int64
				// issued holds every secret the API handed out per
				// subscription id: none may be lost by the re-encryption.
				issued = map[string][]string{}
			)
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				sub := strings.TrimPrefix(r.URL.Path, "/")
				mu.Lock()
				v := verifiers[sub]
				mu.Unlock()
				if v == nil || v.Verify(body, r.Header) != nil {
					refused.Add(1)
					t.Errorf("signature of a delivery to %s does not verify", sub)
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				var ev struct{ ID string }
				_ = json.Unmarshal(body, &ev)
				mu.Lock()
				got[sub][ev.ID] = true
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(recv.Close)

			// 1. Secrets written under A: 8 subscriptions, each rotated
			// twice (24 secret rows).
			n := startNode(t, bin, addr, append(args, "--encryption-key", keyA)...)
			var subs []string
			for i := range 8 {
				path := fmt.Sprintf("/s%d", i)
				sub := call(http.MethodPost, "/v1/subscriptions", map[string]any{"url": recv.URL + path, "event_types": []string{"order.*"}})
				wh, err := standardwebhooks.NewWebhook(sub["secret"].(string))
				require.NoError(t, err)
				id := sub["id"].(string)
				mu.Lock()
				verifiers[path[1:]], got[path[1:]] = wh, map[string]bool{}
				mu.Unlock()
				subs = append(subs, id)
				issued[id] = []string{sub["secret"].(string)}
				for range 2 {
					rot := call(http.MethodPost, "/v1/subscriptions/"+id+"/secret/rotate", map[string]any{})
					issued[id] = append(issued[id], rot["secret"].(string))
				}
			}
			// A connection URL (it carries a password) is sealed and
			// rotated like the secrets.
			call(http.MethodPost, "/v1/connections", map[string]any{"name": "cache", "type": "redis", "url": "redis://:pw@127.0.0.1:6379/0"})
			n.kill9(t)

			// 2. B first, A still decrypting; events flow while rotate-key
			// runs in batches of 2 and secrets rotate through the API.
			n2 := startNode(t, bin, addr, append(args, "--encryption-key", keyB+","+keyA)...)
			var published atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				// After stop, 20 more events: sent with every secret
				// under B.
				last := -1
				for i := 0; last < 0 || i < last; i++ {
					select {
					case <-stop:
						if last < 0 {
							last = i + 20
						}
					default:
					}
					code, b, err := apiCall(ctx, addr, "tok", http.MethodPost, "/v1/events",
						map[string]any{"id": fmt.Sprintf("ev-%d", i), "type": "order.created", "data": map[string]any{"i": i}})
					if err != nil || code != http.StatusAccepted {
						t.Errorf("publish: %d %s %v", code, b, err)
						return
					}
					published.Store(int64(i + 1))
					if i%10 == 0 {
						id := subs[i/10%len(subs)]
						code, b, err := apiCall(ctx, addr, "tok", http.MethodPost, "/v1/subscriptions/"+id+"/secret/rotate", map[string]any{})
						var rot struct{ Secret string }
						if err != nil || code != http.StatusOK || json.Unmarshal(b, &rot) != nil {
							t.Errorf("rotate: %d %s %v", code, b, err)
							return
						}
						mu.Lock()
						issued[id] = append(issued[id], rot.Secret)
						mu.Unlock()
					}
				}
			})
			waitFor(t, 30*time.Second, func() (bool, string) { return published.Load() >= 10, "" },
				func(string) string { return "publishing did not start" })
			out, err := exec.Command(bin, append([]string{"secrets", "rotate-key", "--encryption-key", keyB + "," + keyA, "--batch", "2"}, storeArgs...)...).CombinedOutput()
			close(stop)
			wg.Wait()
			t.Logf("herald secrets rotate-key:\n%s", out)
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "stored secrets are encrypted with key "+idB, "%s", out)
			require.Contains(t, string(out), "rows scanned", "%s", out)

			// Every event reached every subscription, verified.
			total := int(published.Load())
			waitFor(t, 60*time.Second, func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				for sub, evs := range got {
					if len(evs) != total {
						return false, fmt.Sprintf("%s has %d of %d events", sub, len(evs), total)
					}
				}
				return true, ""
			}, func(last string) string { return "deliveries missing: " + last })
			require.Zero(t, refused.Load())

			// A second run finds nothing to do.
			out, err = exec.Command(bin, append([]string{"secrets", "rotate-key", "--encryption-key", keyB + "," + keyA}, storeArgs...)...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.NotContains(t, string(out), "pass 1", "%s", out)

			// 3. The wrong key, or none, refuses to start with a clear
			// message; B alone starts (nothing is left under A).
			n2.kill9(t)
			for _, tt := range []struct {
				keys []string
				want string
			}{
				{[]string{"--encryption-key", keyA}, "were encrypted with key " + idB + " ("},
				{nil, "and no encryption key is configured: pass --encryption-key"},
			} {
				out, err := exec.Command(bin, append(append([]string{"serve", "--listen", freeAddr(t), "--api-token", "tok", "--push=false"}, storeArgs...), tt.keys...)...).CombinedOutput()
				require.Error(t, err, "%s", out)
				require.Contains(t, string(out), tt.want)
			}
			startNode(t, bin, addr, append(args, "--encryption-key", keyB)...)
			for _, id := range subs {
				list := call(http.MethodGet, "/v1/subscriptions/"+id+"/secret", nil)
				var have []string
				for _, sec := range list["secrets"].([]any) {
					have = append(have, sec.(map[string]any)["secret"].(string))
				}
				require.ElementsMatch(t, issued[id], have, "every secret issued, none lost")
			}
			conn := call(http.MethodGet, "/v1/connections/cache", nil)
			require.Equal(t, "redis://:***@127.0.0.1:6379/0", conn["url"], "the URL opens with B alone")
		})
	}
}

func TestSecretsCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"generate-key", []string{"generate-key"}, exitOK},
		{"no command", nil, exitUsage},
		{"unknown", []string{"shred"}, exitUsage},
		{"generate-key args", []string{"generate-key", "x"}, exitUsage},
		{"rotate-key without a key", []string{"rotate-key", "--data-dir", "/nonexistent"}, exitUsage},
		{"rotate-key bad batch", []string{"rotate-key", "--encryption-key", "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "--batch", "0"}, exitUsage},
		{"rotate-key bad flag", []string{"rotate-key", "--no-such-flag"}, exitUsage},
		{"help", []string{"help"}, exitOK},
		{"rotate-key no database", []string{"rotate-key", "--encryption-key", "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "--data-dir", "/nonexistent"}, exitAPI},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr strings.Builder
			err := cmdSecrets(t.Context(), tt.args, &stdout, &stderr)
			require.Equal(t, tt.wantCode, exitCode(err), "%v\n%s", err, stderr.String())
			if tt.name == "generate-key" {
				_, err := seal.ParseKey(stdout.String())
				require.NoError(t, err)
			}
		})
	}
}

func TestPushKeysSealed(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	ring := func(k string) *seal.Ring {
		raw, err := seal.ParseKey(k)
		require.NoError(t, err)
		r, err := seal.NewRing(raw)
		require.NoError(t, err)
		return r
	}
	a, b := ring(mustKey(t)), ring(mustKey(t))
	dir := t.TempDir()
	path := filepath.Join(dir, "push.keys")

	// Generated sealed; read back with the key.
	first, err := pushKeys(&config{DataDir: dir, keys: a}, logger)
	require.NoError(t, err)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, a.PrimaryID(), seal.KeyIDOf(string(raw)))
	require.NotContains(t, string(raw), first)
	again, err := pushKeys(&config{DataDir: dir, keys: a}, logger)
	require.NoError(t, err)
	require.Equal(t, first, again)

	// Without the key, or with another: refused.
	_, err = pushKeys(&config{DataDir: dir}, logger)
	require.ErrorIs(t, err, seal.ErrNoKey)
	_, err = pushKeys(&config{DataDir: dir, keys: b}, logger)
	require.ErrorIs(t, err, seal.ErrUnknownKey)

	// A plain file from before encryption is sealed in place.
	plainDir := t.TempDir()
	plain, err := pushKeys(&config{DataDir: plainDir}, logger)
	require.NoError(t, err)
	got, err := pushKeys(&config{DataDir: plainDir, keys: b}, logger)
	require.NoError(t, err)
	require.Equal(t, plain, got)
	raw, err = os.ReadFile(filepath.Join(plainDir, "push.keys"))
	require.NoError(t, err)
	require.Equal(t, b.PrimaryID(), seal.KeyIDOf(string(raw)))
}
