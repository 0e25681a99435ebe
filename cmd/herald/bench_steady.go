package main

import (
	"context"
	"fmt"
	"io"

	"github.com/heraldhq/herald/bench"
)

// runBenchSteady is `herald bench --steady`: issue 26's steady-rate check
// (bench.SteadyPhases) on one node, --target or a fresh in-process one,
// reporting each rate's CPU per delivery beside the saturated phase's.
func runBenchSteady(ctx context.Context, f *benchFlags, stdout, stderr io.Writer) error {
	counts, err := parseCounts3("--steady-counts", "200/s,1000/s,saturated (e.g. 3000,10000,20000)", f.steadyCounts, 1)
	if err != nil {
		return err
	}
	scope := "node"
	if f.target == "" {
		scope = "process" // publishers and receiver share the process
	}
	var progress io.Writer
	if f.progress {
		progress = stderr
	}
	out, err := f.runPhasesOnNode(ctx, bench.SteadyPhases(counts, f.payload), progress, stderr)
	if err != nil {
		return err
	}
	res := bench.NewSteadyResult(f.phasesTarget(), scope, out)
	if f.floor && ctx.Err() == nil {
		if err := f.runFloor(ctx, &res, counts, progress, stderr); err != nil {
			return err
		}
	}
	if err := writeBenchResult(stdout, f.jsonOut, res, func(w io.Writer) { bench.WriteSteadyReport(w, res) }); err != nil {
		return err
	}
	return ctx.Err()
}

// runFloor is --floor: the steady phases again, through `herald bench
// relay` on the --target node's store kind (PostgreSQL: the
// --observe-database one, in a schema of its own), into res.Floor.
func (f *benchFlags) runFloor(ctx context.Context, res *bench.SteadyResult, counts [3]int64, progress, stderr io.Writer) error {
	recv, err := bench.NewReceiver(bench.ReceiverConfig{})
	if err != nil {
		return err
	}
	defer recv.Close()
	dbURL := f.observeDB
	relay, err := startRelay(ctx, recv.URL(), dbURL, stderr)
	if err != nil {
		return err
	}
	defer relay.stop()
	fmt.Fprintf(stderr, "bench: the floor's relay is pid %d on %s\n", relay.cmd.Process.Pid, relay.url)
	res.FloorStore = "SQLite (WAL, synchronous=FULL)"
	if dbURL != "" {
		res.FloorStore = "PostgreSQL"
	}
	res.Floor, err = bench.RunFloor(ctx, bench.SteadyPhases(counts, f.payload), bench.FloorConfig{
		URL: relay.url, Receiver: recv, PID: relay.cmd.Process.Pid, PostgresCPU: dbURL != "",
	}, progress)
	return err
}
