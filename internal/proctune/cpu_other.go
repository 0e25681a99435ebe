//go:build !unix

package proctune

import "time"

// canReadCPU says whether processCPU reads the process's CPU time.
const canReadCPU = false

// processCPU reads 0 where getrusage is missing; Start does not run a
// tuner on it (the process would look idle and keep one P).
func processCPU() time.Duration { return 0 }
