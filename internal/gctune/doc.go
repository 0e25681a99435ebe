// Package gctune keeps the garbage collector's heap goal at or above a
// floor while the live heap is small.
//
// With GOGC=100 the collector runs each time the heap doubles. A herald
// node's live heap is small (8–20 MB) while what it allocates per delivery
// is not, so at steady rates it collected dozens of times a second: the
// mark workers, assists and the stacks regrown after each cycle's shrink
// were 10–12% of a node's CPU (docs/benchmarks.md, issue 26). Tune raises
// GOGC after each cycle so the next goal is at least the floor, and leaves
// it at the configured percent once the live heap is large enough to reach
// the floor by itself; a large node (many push connections) is collected
// exactly as before. GOMEMLIMIT, when set, still bounds the heap.
package gctune
