package main

import (
	"context"
	"encoding/json"
	"errors"
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
	res := &bench.PhasesResult{Target: f.target, Counts: counts}
	goal := float64(phasesP99GoalSQLiteMs)
	switch {
	case f.target == "" && f.databaseURL != "":
		res.Target, goal = "in-process postgres", phasesP99GoalPostgresMs
	case f.target == "":
		res.Target = "in-process sqlite (synchronous=" + f.sqliteSync + ")"
	case f.observeDB != "":
		goal = phasesP99GoalPostgresMs
	default:
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
		var watch *bench.PGWatch
		start := func(ctx context.Context) (bench.Node, func(), error) {
			if f.target != "" {
				if f.observeDB != "" {
					w, err := bench.WatchPostgres(ctx, f.observeDB, "")
					if err != nil {
						return bench.Node{}, nil, err
					}
					watch = w
				}
				return bench.Node{URL: f.target, Token: f.token, Remote: true}, func() {}, nil
			}
			n, cleanup, err := f.startInProcess(ctx, stderr)
			if err != nil {
				return bench.Node{}, nil, err
			}
			if f.databaseURL != "" {
				w, err := bench.WatchPostgres(ctx, f.databaseURL, n.cfg.pgSchema)
				if err != nil {
					cleanup()
					return bench.Node{}, nil, err
				}
				watch = w
			}
			return bench.Node{URL: n.URL(), Token: n.cfg.APIToken}, cleanup, nil
		}
		phases := bench.DefaultPhases(counts, f.payload)
		for i := range phases {
			phases[i].PostgresCPU = f.databaseURL != "" || f.observeDB != ""
		}
		// The node (and its database watch) first, so the watch exists
		// before the first phase's mark.
		node, stop, err := start(ctx)
		if err != nil {
			return err
		}
		out, err := bench.RunPhases(ctx, phases, node, watch, progress)
		stop()
		if watch != nil {
			watch.Close()
		}
		if err != nil {
			return err
		}
		res.Runs = append(res.Runs, bench.PhasesRun{Run: run, Phases: out})
	}
	bench.SummarizePhases(res, goal)
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	bench.WritePhasesReport(stdout, res)
	return ctx.Err()
}

// parsePhaseCounts reads --phase-counts: three counts, each 0..1,000,000,
// not all zero.
func parsePhaseCounts(raw string) ([3]int64, error) {
	var out [3]int64
	parts := strings.Split(raw, ",")
	if len(parts) != 3 {
		return out, errors.New("--phase-counts must be three counts: single,batch,rate (e.g. 30000,50000,10000)")
	}
	var total int64
	for i, p := range parts {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || n < 0 || n > 1_000_000 {
			return out, fmt.Errorf("--phase-counts: %q is not a count of 0..1000000", p)
		}
		out[i], total = n, total+n
	}
	if total == 0 {
		return out, errors.New("--phase-counts: every phase is 0")
	}
	return out, nil
}
