//go:build linux

package proctune

import (
	"fmt"
	"os"
	"syscall"
)

// KeepSysmonAwake starts this program again in the same process, with the
// same arguments and environment plus SysmonGODEBUG, unless GODEBUG already
// sets schedtrace (then it returns nil and does nothing). The runtime reads
// GODEBUG's schedtrace only when a process starts, so setting it takes an
// exec; call it before opening anything that is not close-on-exec. It
// returns only on failure; the process then runs on without the setting.
//
// It executes /proc/self/exe, which names this program's file even after
// the file on disk was replaced (an upgrade in place). The process id stays
// the same, so a supervisor or a test that started it sees no change.
func KeepSysmonAwake() error {
	env, ok := SysmonEnv(os.Environ())
	if !ok {
		return nil
	}
	//nolint:gosec // G204: re-executes this same program with its own arguments
	if err := syscall.Exec("/proc/self/exe", os.Args, env); err != nil {
		return fmt.Errorf("re-executing with GODEBUG=%s: %w", SysmonGODEBUG, err)
	}
	return nil
}
