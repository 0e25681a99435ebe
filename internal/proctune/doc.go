// Package proctune runs the process on one P (GOMAXPROCS=1) while it uses
// little CPU, and on all of them under load.
//
// At the rates most nodes run (a few hundred deliveries a second) each
// delivery's steps — the publish's read, the commit's round trip, the
// webhook's — leave the node idle in between, and with several Ps every
// goroutine made runnable wakes a spinning thread on another core to look
// for it: futex wake-ups, context switches and the scheduler's search,
// paid per delivery. On one P the hand-off stays on the thread that made
// it. Measured with a separate serve at 200/s, 10–24% less node CPU per
// delivery on both stores, p99 unchanged (docs/benchmarks.md, issue 26;
// ADR 0037).
//
// A Tuner reads the process's CPU time (getrusage) every Interval (250
// ms). At one P, one interval above 0.95 of a core, or two averaging above
// Up (0.85), restore Max, so a burst that fills the P waits at most one
// interval for the other cores; at Max,
// an average under Down (0.75 of a core) over DownAfter (2 s) lowers it to
// one.
// Down is below Up and a load costs no more on one P than on several, so a
// steady load does not flip between the two. Each change is one
// runtime.GOMAXPROCS call (a brief stop of the world).
package proctune
