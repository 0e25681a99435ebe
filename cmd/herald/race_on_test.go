//go:build race

package main

// raceEnabled: this test binary runs under the race detector, whose cost
// per goroutine step makes the test process's own timing (a publisher and
// a receiver measuring latency) unfit for latency bounds.
const raceEnabled = true
