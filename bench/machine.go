package bench

import (
	"os"
	"strconv"
	"strings"
)

// The machine's share of a run: how busy its cores were and how much of
// their time the hypervisor gave to other guests (steal). On a virtual
// machine steal is why the same binary reads 1.5× slower from one hour to
// the next (measured here: 6–26% steal in 2-s samples while a phases run
// went from 4,300 to 2,500 single deliveries/s), so every report carries
// it: figures of runs with different steal are not comparable, and only
// pairs alternated in one window are.

// MachineUsage is the machine's CPU over a span, from /proc/stat, as
// shares of all its cores' time (percent).
type MachineUsage struct {
	BusyPct  float64 `json:"busy_pct"`
	StealPct float64 `json:"steal_pct"`
	IdlePct  float64 `json:"idle_pct"`
}

// machineTicks is the aggregate "cpu" line of /proc/stat.
type machineTicks struct {
	busy, steal, idle float64
	ok                bool
}

// readMachineTicks reads /proc/stat (zero, not ok, where there is none).
func readMachineTicks() machineTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseMachineTicks(line)
}

// parseMachineTicks parses "cpu user nice system idle iowait irq softirq
// steal guest guest_nice" (guest time is already in user and nice).
func parseMachineTicks(line string) machineTicks {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineTicks{}
	}
	v := make([]float64, 8)
	for i := range v {
		x, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil {
			return machineTicks{}
		}
		v[i] = x
	}
	user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	return machineTicks{busy: user + nice + system + irq + softirq, steal: steal, idle: idle + iowait, ok: true}
}

// usageSince is the machine's usage from a to b (nil when either reading
// failed or no time passed).
func usageSince(a, b machineTicks) *MachineUsage {
	if !a.ok || !b.ok {
		return nil
	}
	busy, steal, idle := b.busy-a.busy, b.steal-a.steal, b.idle-a.idle
	total := busy + steal + idle
	if total <= 0 {
		return nil
	}
	return &MachineUsage{BusyPct: 100 * busy / total, StealPct: 100 * steal / total, IdlePct: 100 * idle / total}
}
