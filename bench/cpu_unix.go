//go:build unix

package bench

import "syscall"

// processCPU is this process's user+system CPU time in seconds
// (getrusage: microsecond resolution, where /proc/self/stat counts 10 ms
// ticks).
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuSeconds("self")
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
