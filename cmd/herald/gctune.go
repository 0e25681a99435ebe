package main

import (
	"log/slog"
	"os"

	"github.com/heraldhq/herald/internal/gctune"
)

// tuneGC starts the heap-goal floor of --gc-heap-floor for this process,
// unless GOGC is set (the operator's choice wins) or the floor is 0. The
// returned stop restores Go's default pacing.
func tuneGC(c *config, logger *slog.Logger) (stop func()) {
	if c.GCHeapFloor == 0 {
		return func() {}
	}
	if os.Getenv("GOGC") != "" {
		logger.Info("GOGC is set: --gc-heap-floor is off", "gogc", os.Getenv("GOGC"))
		return func() {}
	}
	t := gctune.Tune(uint64(c.GCHeapFloor), 100)
	return t.Stop
}
