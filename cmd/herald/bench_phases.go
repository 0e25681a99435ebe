package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/heraldhq/herald/bench"
)

// The p99 goals of the rate phase (issue 28): a node that has just worked
// holds them in every run.
const (
	phasesP99GoalPostgresMs = 50
	phasesP99GoalSQLiteMs   = 20
)

// runBenchPhases is `herald bench --phases N`: N runs of the after-load
// check (bench.DefaultPhases), each on a fresh in-process node, or all on
// --target.
func runBenchPhases(ctx context.Context, f *benchFlags, stdout, stderr io.Writer) error {
	counts, err := parsePhaseCounts(f.phaseCounts)
	if err != nil {
		return err
	}
	res := &bench.PhasesResult{Target: f.phasesTarget(), Counts: counts}
	goal := float64(phasesP99GoalSQLiteMs)
	switch {
	case f.measuresPostgres():
		goal = phasesP99GoalPostgresMs
	case f.target != "":
		goal = 0 // the store of --target is unknown
	}
	var progress io.Writer
	if f.progress {
		progress = stderr
	}
	for run := 1; run <= f.phases && ctx.Err() == nil; run++ {
		if progress != nil {
			fmt.Fprintf(progress, "run %d of %d\n", run, f.phases)
		}
		out, err := f.runPhasesOnNode(ctx, bench.DefaultPhases(counts, f.payload), progress, stderr)
		if err != nil {
			return err
		}
		res.Runs = append(res.Runs, bench.PhasesRun{Run: run, Phases: out})
	}
	bench.SummarizePhases(res, goal)
	if err := writeBenchResult(stdout, f.jsonOut, res, func(w io.Writer) { bench.WritePhasesReport(w, res) }); err != nil {
		return err
	}
	return ctx.Err()
}

// phasesTarget names the node phases run on: --target, or the in-process
// node's store.
func (f *benchFlags) phasesTarget() string {
	switch {
	case f.target != "":
		return f.target
	case f.databaseURL != "":
		return "in-process postgres"
	default:
		return "in-process sqlite (synchronous=" + f.sqliteSync + ")"
	}
}

// measuresPostgres reports whether the node's store is PostgreSQL whose CPU
// the bench can read: an in-process PostgreSQL node, or --observe-database.
func (f *benchFlags) measuresPostgres() bool {
	return f.databaseURL != "" || f.observeDB != ""
}

// runPhasesOnNode runs phases in order on one node (phasesNode), stopped
// afterwards, each measuring PostgreSQL's CPU when it can.
func (f *benchFlags) runPhasesOnNode(ctx context.Context, phases []bench.Phase, progress, stderr io.Writer) ([]bench.PhaseResult, error) {
	for i := range phases {
		phases[i].PostgresCPU = f.measuresPostgres()
	}
	node, watch, stop, err := f.phasesNode(ctx, stderr)
	if err != nil {
		return nil, err
	}
	defer stop()
	return bench.RunPhases(ctx, phases, node, watch, progress)
}

// phasesNode starts the node that phases run on, and its database watch
// (nil on SQLite or an unobserved --target) first, so the watch exists
// before the first phase's mark: --target with --observe-database, or a
// fresh in-process node. stop ends both.
func (f *benchFlags) phasesNode(ctx context.Context, stderr io.Writer) (bench.Node, *bench.PGWatch, func(), error) {
	var watch *bench.PGWatch
	closeWatch := func() {
		if watch != nil {
			watch.Close()
		}
	}
	if f.target != "" {
		if f.observeDB != "" {
			w, err := bench.WatchPostgres(ctx, f.observeDB, "")
			if err != nil {
				return bench.Node{}, nil, nil, err
			}
			watch = w
		}
		return bench.Node{URL: f.target, Token: f.token, Remote: true}, watch, closeWatch, nil
	}
	n, cleanup, err := f.startInProcess(ctx, stderr)
	if err != nil {
		return bench.Node{}, nil, nil, err
	}
	if f.databaseURL != "" {
		w, err := bench.WatchPostgres(ctx, f.databaseURL, n.cfg.pgSchema)
		if err != nil {
			cleanup()
			return bench.Node{}, nil, nil, err
		}
		watch = w
	}
	return bench.Node{URL: n.URL(), Token: n.cfg.APIToken}, watch, func() { cleanup(); closeWatch() }, nil
}

// countsFlag is the default of a three-count flag (parseCounts3).
func countsFlag(c [3]int64) string {
	return fmt.Sprintf("%d,%d,%d", c[0], c[1], c[2])
}

// parsePhaseCounts reads --phase-counts: three counts, each 0..1,000,000,
// not all zero.
func parsePhaseCounts(raw string) ([3]int64, error) {
	return parseCounts3("--phase-counts", "single,batch,rate (e.g. 30000,50000,10000)", raw, 0)
}

// parseCounts3 reads a flag of three counts, each least..1,000,000 and not
// all zero; what names them in the error.
func parseCounts3(flagName, what, raw string, least int64) ([3]int64, error) {
	var out [3]int64
	parts := strings.Split(raw, ",")
	if len(parts) != 3 {
		return out, fmt.Errorf("%s must be three counts: %s", flagName, what)
	}
	var total int64
	for i, p := range parts {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || n < least || n > 1_000_000 {
			return out, fmt.Errorf("%s: %q is not a count of %d..1000000", flagName, p, least)
		}
		out[i], total = n, total+n
	}
	if total == 0 {
		return out, fmt.Errorf("%s: every phase is 0", flagName)
	}
	return out, nil
}
