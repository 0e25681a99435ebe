//go:build !unix

package bench

// processCPU is this process's user+system CPU time in seconds (0 where
// there is no /proc).
func processCPU() float64 { return cpuSeconds("self") }
