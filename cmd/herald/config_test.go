package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/seal"
)

func loadConfig(t *testing.T, args []string) (*config, error) {
	t.Helper()
	c := &config{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.flags(fs)
	return c, c.load(fs, args)
}

// Precedence is flag, then environment, then file, then default. Not
// parallel: it sets environment variables.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "herald.yaml")
	require.NoError(t, os.WriteFile(file, []byte("listen: 127.0.0.1:9999\nworkers: 7\ntiers: [0s, 2s]\ndata_dir: /from/file\ndev: true\n"), 0o600))
	t.Setenv("HERALD_WORKERS", "9")
	t.Setenv("HERALD_DATA_DIR", "/from/env")

	c, err := loadConfig(t, []string{"--config", file, "--data-dir", "/from/flag"})
	require.NoError(t, err)
	require.Equal(t, "/from/flag", c.DataDir, "flag beats env and file")
	require.Equal(t, 9, c.Workers, "env beats file")
	require.Equal(t, "127.0.0.1:9999", c.Listen, "file beats default")
	require.Equal(t, []time.Duration{0, 2 * time.Second}, c.tiers)
	require.True(t, c.Dev)
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(t, nil)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", c.Listen)
	require.Equal(t, "./herald-data", c.DataDir)
	require.Equal(t, []time.Duration{0, 5 * time.Second, time.Minute, 10 * time.Minute, time.Hour,
		6 * time.Hour, 24 * time.Hour, 24 * time.Hour, 24 * time.Hour}, c.tiers)
	require.False(t, c.Dev)
	require.Equal(t, 5*time.Minute, c.StaleAfter)
	require.Equal(t, 72*time.Hour, c.RetentionDelivered)
	require.Equal(t, 30*24*time.Hour, c.RetentionDead)
	require.Equal(t, 7*24*time.Hour, c.RetentionEvents)
	require.Empty(t, c.PushListen)
	require.Empty(t, c.AdminListen)
	require.Zero(t, c.MaxConns) // derived at start
	require.Zero(t, c.PushMaxConns)
	require.Equal(t, 64, c.PushMaxConnsPerIP)
	require.Equal(t, 10*time.Second, c.ReadTimeout)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.yaml")
	require.NoError(t, os.WriteFile(unknown, []byte("no_such_key: 1\n"), 0o600))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad tier", []string{"--tiers", "0s,soon"}, `"soon" is not a duration`},
		{"negative tier", []string{"--tiers", "-1s"}, "negative"},
		{"no tiers", []string{"--tiers", ","}, "at least one tier"},
		{"bad cidr", []string{"--allow-cidr", "10.0.0.0/99"}, "not a CIDR"},
		{"bad workers", []string{"--workers", "0"}, "at least 1"},
		{"bad db url", []string{"--database-url", "mysql://x"}, "postgres://"},
		{"bad sync", []string{"--sqlite-synchronous", "off"}, "full or normal"},
		{"negative retention", []string{"--retention-dead", "-1h"}, "--retention-dead must not be negative"},
		{"negative stale", []string{"--stale-after", "-1s"}, "--stale-after must not be negative"},
		{"negative vacuum interval", []string{"--vacuum-interval", "-10s"}, "--vacuum-interval must not be negative"},
		{"bad debug listen", []string{"--debug-listen", "6060"}, "--debug-listen"},
		// Issue 20, item 8: every such node would get the id http://[::]:PORT.
		{"internal listen on every address", []string{"--internal-listen", ":8081"}, "set --internal-url"},
		{"internal listen on 0.0.0.0", []string{"--internal-listen", "0.0.0.0:8081"}, "set --internal-url"},
		{"internal listen on ::", []string{"--internal-listen", "[::]:8081"}, "set --internal-url"},
		{"internal tls alone", []string{"--internal-listen", "127.0.0.1:8081", "--internal-tls-cert", "c.pem"}, "go together"},
		{"internal tls without listener", []string{"--internal-tls-cert", "c", "--internal-tls-key", "k", "--internal-tls-ca", "ca"}, "needs --internal-listen"},
		{"internal tls with http url", []string{"--internal-listen", "127.0.0.1:8081", "--internal-url", "http://10.0.0.5:8081",
			"--internal-tls-cert", "c", "--internal-tls-key", "k", "--internal-tls-ca", "ca"}, "https://"},
		{"bad push listen", []string{"--push-listen", "8081"}, "--push-listen"},
		{"bad admin listen", []string{"--admin-listen", "8082"}, "--admin-listen"},
		{"push listen without push", []string{"--push-listen", ":8081", "--push=false"}, "--push-listen needs --push"},
		{"negative push cap", []string{"--push-max-conns", "-1"}, "--push-max-conns must not be negative"},
		{"negative per-ip cap", []string{"--push-max-conns-per-ip", "-1"}, "--push-max-conns-per-ip must not be negative"},
		{"negative max conns", []string{"--max-conns", "-1"}, "--max-conns must not be negative"},
		{"zero read timeout", []string{"--read-timeout", "0s"}, "--read-timeout must be positive"},
		{"negative heap floor", []string{"--gc-heap-floor", "-1"}, "--gc-heap-floor must be from 0 (off)"},
		{"huge heap floor", []string{"--gc-heap-floor", "17179869185"}, "--gc-heap-floor must be from 0 (off)"},
		{"bad adapt-procs", []string{"--adapt-procs", "yes"}, "--adapt-procs must be auto, on or off"},
		{"unknown file key", []string{"--config", unknown}, `unknown key "no_such_key"`},
		{"missing file", []string{"--config", filepath.Join(dir, "absent.yaml")}, "error reading config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadConfig(t, tt.args)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestConfigEncryptionKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b, c := mustKey(t), mustKey(t), mustKey(t)
	file := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(file, []byte("# the encrypting key first\n"+b+"\n\n# old\n"+c+"\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("# nothing yet\n"), 0o600))
	tests := []struct {
		name    string
		args    []string
		want    []string // key ids, the encrypting one first
		wantErr string
	}{
		{"none", nil, nil, ""},
		{"flag", []string{"--encryption-key", a + "," + b}, []string{keyID(t, a), keyID(t, b)}, ""},
		{"file", []string{"--encryption-key-file", file}, []string{keyID(t, b), keyID(t, c)}, ""},
		{"flag then file", []string{"--encryption-key", a, "--encryption-key-file", file}, []string{keyID(t, a), keyID(t, b), keyID(t, c)}, ""},
		{"bad key", []string{"--encryption-key", "hunter2"}, nil, "--encryption-key: key 1"},
		{"short key", []string{"--encryption-key", "AAAA"}, nil, "want 32"},
		{"twice", []string{"--encryption-key", a + "," + a}, nil, "given twice"},
		{"missing file", []string{"--encryption-key-file", filepath.Join(dir, "absent")}, nil, "--encryption-key-file"},
		{"empty file", []string{"--encryption-key-file", empty}, nil, "holds no key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadConfig(t, tt.args)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, cfg.keys.IDs())
		})
	}
}

func mustKey(t *testing.T) string {
	t.Helper()
	k, err := seal.GenerateKey()
	require.NoError(t, err)
	return k
}

func keyID(t *testing.T, k string) string {
	t.Helper()
	raw, err := seal.ParseKey(k)
	require.NoError(t, err)
	return seal.KeyID(raw)
}

func TestValidFrameAncestors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"", true},
		{"https://app.example.com", true},
		{"https://app.example.com http://127.0.0.1:9000 'self'", true},
		{"https://*.example.com", true},
		{"https://app.example.com/", true},
		{"app.example.com", false},
		{"https://app.example.com/path", false},
		{"https://app.example.com; script-src *", false},
		{"https://a.example.com,https://b.example.com", false},
		{"'none'", false},
		{"javascript:alert(1)", false},
		{"https://user@app.example.com", false},
	} {
		err := validFrameAncestors(tc.in)
		require.Equal(t, tc.ok, err == nil, "%q: %v", tc.in, err)
	}
}
