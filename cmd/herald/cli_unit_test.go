package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/client"
)

func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{usageError{flag.ErrHelp}, 0},
		{usagef("bad"), 2},
		{&client.APIError{Status: 404, Code: "not_found", Message: "x"}, 1},
		{fmt.Errorf("wrapped: %w", &client.ConnError{URL: "http://x", Err: errors.New("refused")}), 3},
		{context.Canceled, 130},
		{fmt.Errorf("polling: %w", context.Canceled), 130},
		{errors.New("other"), 1},
	} {
		require.Equal(t, tc.want, exitCode(tc.err), "%v", tc.err)
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	at, err := parseTime("since", "2025-01-02T15:04:05Z")
	require.NoError(t, err)
	require.Equal(t, time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC), at)
	ago, err := parseTime("since", "1h")
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(-time.Hour), ago, time.Minute)
	zero, err := parseTime("since", "")
	require.NoError(t, err)
	require.True(t, zero.IsZero())
	for _, bad := range []string{"yesterday", "-1h", "2025-01-02"} {
		_, err := parseTime("since", bad)
		require.Equal(t, exitUsage, exitCode(err), bad)
	}
}

func TestSplitList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"order.*", []string{"order.*"}},
		{" order.*, user.* ,,", []string{"order.*", "user.*"}},
	} {
		require.Equal(t, tc.want, splitList(tc.in), tc.in)
	}
}

func TestSubscriptionFlagsBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		create bool
		args   []string
		want   map[string]any
	}{
		{"create rate limit defaults per_seconds", true, []string{"--url", "http://x", "--rate-limit-max", "5"},
			map[string]any{"url": "http://x", "rate_limit": map[string]any{"max": 5, "per_seconds": 1}}},
		{"update sends only what is given", false, []string{"--description", ""},
			map[string]any{"description": ""}},
		{"update header removal", false, []string{"--header", "A=1", "--header", "B="},
			map[string]any{"headers": map[string]any{"A": "1", "B": nil}}},
		{"update max only merges", false, []string{"--rate-limit-max", "9"},
			map[string]any{"rate_limit": map[string]any{"max": 9}}},
		{"no filter", false, []string{"--no-filter"}, map[string]any{"filter": nil}},
		{"event types", true, []string{"--event-types", "a.*,b"}, map[string]any{"event_types": []string{"a.*", "b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			var f subFlags
			f.register(fs, tc.create)
			require.NoError(t, fs.Parse(tc.args))
			got, err := f.body(fs, tc.create)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// The bar draws only on a terminal; elsewhere stderr stays clean.
func TestProgressBar(t *testing.T) {
	t.Parallel()
	for _, tty := range []bool{false, true} {
		var buf bytes.Buffer
		c := &cli{cliEnv: &cliEnv{stderr: &buf, stderrTTY: tty}}
		p := c.newProgress("redriving", 10)
		p.set(5, true)
		p.set(10, true)
		p.done()
		if !tty {
			require.Empty(t, buf.String())
			continue
		}
		require.Contains(t, buf.String(), "\r\x1b[Kredriving [")
		require.Contains(t, buf.String(), " 50% 5/10")
		require.Contains(t, buf.String(), "100% 10/10\n")
	}
}

func TestResolveServerAndToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, writeFile(dir+"/admin.token", "hrld_local\n"))
	envOf := func(m map[string]string) *cliEnv { return &cliEnv{getenv: func(k string) string { return m[k] }} }
	for _, tc := range []struct {
		name          string
		g             globalFlags
		env           map[string]string
		server, token string
		from          string
	}{
		{"defaults read the local token", globalFlags{dataDir: dir}, nil, defaultServer, "hrld_local", dir + "/admin.token"},
		{"env data dir", globalFlags{}, map[string]string{"HERALD_DATA_DIR": dir}, defaultServer, "hrld_local", dir + "/admin.token"},
		{"flags win", globalFlags{server: "http://h:1/", token: "t"}, map[string]string{"HERALD_URL": "http://e", "HERALD_TOKEN": "e"}, "http://h:1", "t", "--token"},
		{"env", globalFlags{}, map[string]string{"HERALD_URL": "http://e:2", "HERALD_TOKEN": "e"}, "http://e:2", "e", "HERALD_TOKEN"},
		{"remote server: no local token", globalFlags{server: "https://herald.example", dataDir: dir}, nil, "https://herald.example", "", ""},
		{"ipv6 loopback", globalFlags{server: "http://[::1]:8080", dataDir: dir}, nil, "http://[::1]:8080", "hrld_local", dir + "/admin.token"},
	} {
		s, tok, from, err := tc.g.resolve(envOf(tc.env))
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.server, s, tc.name)
		require.Equal(t, tc.token, tok, tc.name)
		require.Equal(t, tc.from, from, tc.name)
	}
	_, _, _, err := (&globalFlags{server: "127.0.0.1:8080"}).resolve(envOf(nil))
	require.Equal(t, exitUsage, exitCode(err))
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

func TestVersionString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "herald dev", versionString("dev", nil))
	require.Equal(t, "herald dev", versionString("dev", &debug.BuildInfo{}))
	info := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-11-27T07:00:00Z"},
		{Key: "vcs.modified", Value: "false"},
	}}
	require.Equal(t, "herald v1.2.0 (commit 0123456789ab, 2026-11-27T07:00:00Z)", versionString("v1.2.0", info))
	info.Settings[2].Value = "true"
	require.Equal(t, "herald dev (commit 0123456789ab with local changes, 2026-11-27T07:00:00Z)", versionString("dev", info))
}
