package bench

import (
	"os"
	"strconv"
	"strings"
)

// postgresCPU is the CPU seconds, user and system, of every PostgreSQL
// server process on this machine: live processes named "postgres" (the
// postmaster, its backends, WAL writer, checkpointer, autovacuum…) plus
// what the postmaster's children that have exited used (its cutime and
// cstime), so a backend that ends during a run still counts. bench runs on
// loopback, so the server is this machine's; its other databases' work
// counts too, so measure on a quiet server. 0 where there is no /proc.
func postgresCPU() float64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total float64
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		name, rest, ok := strings.Cut(string(b), ") ")
		if !ok || !strings.HasSuffix(name, "(postgres") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 15 {
			continue
		}
		// After the name: state, ppid, … utime (12th), stime (13th),
		// cutime (14th), cstime (15th), in clock ticks (100 Hz).
		ticks := 0.0
		for _, i := range []int{11, 12} {
			v, _ := strconv.ParseFloat(f[i], 64)
			ticks += v
		}
		if !isPostgres(f[1]) {
			// The postmaster (its parent is not postgres): count its
			// exited children too.
			for _, i := range []int{13, 14} {
				v, _ := strconv.ParseFloat(f[i], 64)
				ticks += v
			}
		}
		total += ticks / 100
	}
	return total
}

// isPostgres reports whether process pid is named postgres.
func isPostgres(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/comm") //nolint:gosec // pid is a ppid field of /proc/<n>/stat: digits

	return err == nil && strings.TrimSpace(string(b)) == "postgres"
}
