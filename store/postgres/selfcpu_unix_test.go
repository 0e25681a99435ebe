//go:build unix

package postgres_test

import "syscall"

// selfCPU is this process's user and system CPU seconds (getrusage:
// microsecond resolution), 0 when it cannot be read.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
