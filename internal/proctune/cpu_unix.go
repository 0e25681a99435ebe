//go:build unix

package proctune

import (
	"syscall"
	"time"
)

// canReadCPU says whether processCPU reads the process's CPU time.
const canReadCPU = true

// processCPU is the user and system CPU time of every thread of this
// process (getrusage: microseconds).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
