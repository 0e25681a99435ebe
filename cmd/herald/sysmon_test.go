//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/proctune"
)

// TestServeKeepsSysmonAwake starts `herald serve` as a user would: the
// process the test started (same pid) runs with proctune.SysmonGODEBUG in
// its environment, and --sysmon-awake=false leaves GODEBUG alone.
func TestServeKeepsSysmonAwake(t *testing.T) {
	t.Parallel()
	bin := heraldBinary(t)
	awake, _ := proctune.SysmonEnv(os.Environ())
	for _, tt := range []struct {
		flag string
		want string
	}{
		{"--sysmon-awake=true", godebugOf(awake)},
		{"--sysmon-awake=false", godebugOf(os.Environ())},
	} {
		logs := &syncBuffer{}
		n := startChaosNode(t, bin, freeAddr(t), logs, []string{"--data-dir", t.TempDir(), tt.flag})
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", n.cmd.Process.Pid))
		require.NoError(t, err)
		got := godebugOf(strings.Split(string(raw), "\x00"))
		require.Equal(t, tt.want, got, "%s: the environment of the running node; logs:\n%s", tt.flag, logs.Tail(4<<10))
		require.NoError(t, n.cmd.Process.Kill())
		<-n.done
	}
}

// godebugOf is the GODEBUG entry of env ("" when there is none).
func godebugOf(env []string) string {
	got := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "GODEBUG=") {
			got = kv
		}
	}
	return got
}
