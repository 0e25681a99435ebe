package proctune

import "strings"

// SysmonGODEBUG is the GODEBUG setting that keeps Go's monitor thread
// (sysmon) out of its deep sleep: a scheduler trace every 2^31-1 ms, the
// largest period the runtime takes (24.8 days).
//
// Why: when every P is idle, sysmon parks until the next timer, and the
// first goroutine to enter a system call or cgo call afterwards wakes it
// (a futex wake on that goroutine's path) and resets its step to 20 µs,
// which it keeps for 50 steps while any P is busy. A node at a few hundred
// deliveries a second goes idle between each delivery's steps (the
// publish, the commit, the webhook), so it paid that wake and a run of
// 20-µs sleeps several times per delivery: 17% of a SQLite node's CPU at
// 200/s was sysmon (docs/benchmarks.md, issue 26; ADR 0040). The runtime
// skips the deep sleep while schedtrace is set; sysmon then sleeps its
// longest step (10 ms) whenever it has nothing to take back, so an idle
// node pays 100 short wake-ups a second instead. The trace itself is one
// line on stderr per period, and one at start when the machine has been up
// longer than the period (the runtime counts from boot).
const SysmonGODEBUG = "schedtrace=2147483647"

// SysmonEnv returns env (os.Environ's form) with SysmonGODEBUG added to
// GODEBUG, and true; or env unchanged and false when GODEBUG already sets
// schedtrace (the operator's setting wins, and a process started by
// KeepSysmonAwake has it).
func SysmonEnv(env []string) ([]string, bool) {
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		for _, s := range strings.Split(v, ",") {
			if strings.HasPrefix(s, "schedtrace=") {
				return env, false
			}
		}
		out := append([]string(nil), env...)
		if v == "" {
			out[i] = "GODEBUG=" + SysmonGODEBUG
		} else {
			out[i] = kv + "," + SysmonGODEBUG
		}
		return out, true
	}
	return append(append([]string(nil), env...), "GODEBUG="+SysmonGODEBUG), true
}
