// Package proctune runs the process on one P (GOMAXPROCS=1) while it uses
// little CPU, and on all of them under load.
//
// At the rates most nodes run (a few hundred deliveries a second) each
// delivery's steps — the publish's read, the commit's round trip, the
// webhook's — leave the node idle in between, and with several Ps every
// goroutine made runnable wakes a spinning thread on another core to look
// for it: futex wake-ups, context switches and the scheduler's search,
// paid per delivery. On one P the hand-off stays on the thread that made
// it. Measured on a separate PostgreSQL node, alternated: a median 19%
// less node CPU per delivery at 200/s and 8% at 1,000/s, p99 unchanged
// (docs/benchmarks.md, issue 26; ADR 0037). serve leaves SQLite nodes
// alone by default: there the commit's fsync is a cgo call that holds the
// one P, and p99 rose.
//
// A Tuner reads the process's CPU time (getrusage) and the runtime's
// scheduling latencies every Interval (250 ms). At one P, one interval
// above 0.95 of a core, or two averaging above DefaultUp (0.85), restore
// Max, so a burst that fills the P waits at most one interval for the
// other cores. So does an interval in which 10% or more of the goroutines
// made runnable waited LateWait (1 ms) or more to run: a node that shares
// its cores with PostgreSQL or a load generator can be saturated while
// using less than DefaultDown, and then Max holds for 30 s. At Max, an
// average under DefaultDown (0.75 of a core) over DownAfter (2 s) lowers
// it to one. DefaultDown is below DefaultUp and a load costs no more on
// one P than on several, so a steady load does not flip between the two.
// Each change is one runtime.GOMAXPROCS call (a brief stop of the world).
//
// KeepSysmonAwake (serve --sysmon-awake, ADR 0040) starts the program once
// more with SysmonGODEBUG, so Go's monitor thread does not park whenever
// every P is idle, to be woken with its shortest step by the next system
// call: at a few hundred deliveries a second that happened several times
// per delivery.
package proctune
