package main

import (
	"context"
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
	if err := writeBenchResult(stdout, f.jsonOut, res, func(w io.Writer) { bench.WriteSteadyReport(w, res) }); err != nil {
		return err
	}
	return ctx.Err()
}
