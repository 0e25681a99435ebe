package proctune_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/proctune"
)

// TestKeepSysmonAwake runs this test binary as a child that calls
// KeepSysmonAwake: the child starts again in the same process with the
// setting in GODEBUG, and the second start leaves it alone (no loop).
func TestKeepSysmonAwake(t *testing.T) {
	if os.Getenv("PROCTUNE_SYSMON_CHILD") == "1" {
		if err := proctune.KeepSysmonAwake(); err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		fmt.Printf("pid=%d godebug=%s\n", os.Getpid(), os.Getenv("GODEBUG"))
		os.Exit(0)
	}
	for _, tt := range []struct{ godebug, want string }{
		{"", proctune.SysmonGODEBUG},
		{"gctrace=0", "gctrace=0," + proctune.SysmonGODEBUG},
		{"schedtrace=0", "schedtrace=0"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKeepSysmonAwake$")
		cmd.Env = append(os.Environ(), "PROCTUNE_SYSMON_CHILD=1", "GODEBUG="+tt.godebug)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Run(), out.String())
		require.Equal(t, fmt.Sprintf("pid=%d godebug=%s\n", cmd.Process.Pid, tt.want), out.String(),
			"GODEBUG=%q: one line, from the process the test started", tt.godebug)
	}
}
