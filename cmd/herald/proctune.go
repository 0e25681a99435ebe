package main

import (
	"log/slog"
	"os"

	"github.com/heraldhq/herald/internal/proctune"
)

// tuneProcs starts --adapt-procs for this process (internal/proctune,
// ADR 0037): "on", or "auto" on PostgreSQL. Off on SQLite by default: its
// commit is a cgo call (with the WAL's fsync) that holds the only P until
// sysmon hands it on, which raised p99 at 200/s from 6–7 ms to 12–15 ms in
// two of three alternated runs. GOMAXPROCS in the environment wins. The
// returned stop restores the runtime's default.
func tuneProcs(c *config, logger *slog.Logger) (stop func()) {
	if !adaptProcs(c) {
		return func() {}
	}
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		logger.Info("GOMAXPROCS is set: --adapt-procs is off", "gomaxprocs", v)
		return func() {}
	}
	t := proctune.Start(proctune.Config{OnChange: func(procs int, cores float64) {
		logger.Debug("GOMAXPROCS changed", "gomaxprocs", procs, "cores_used", cores)
	}})
	return t.Stop
}

// adaptProcs reports whether --adapt-procs applies to this node's store.
func adaptProcs(c *config) bool {
	return c.AdaptProcs == "on" || (c.AdaptProcs == "auto" && c.DatabaseURL != "")
}

// keepSysmonAwake applies --sysmon-awake (ADR 0040): unless GODEBUG already
// sets schedtrace, it starts this program again in the same process with
// proctune.SysmonGODEBUG, and returns only on failure (or when off).
func keepSysmonAwake(c *config) error {
	if !c.SysmonAwake {
		return nil
	}
	return proctune.KeepSysmonAwake()
}
