package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/heraldhq/herald/bench"
)

// runBenchIdle is `herald bench --idle D`: what a node with no traffic
// costs (issue 26's goal: under 1% of a core for the node, and for
// PostgreSQL on its behalf).
func runBenchIdle(ctx context.Context, f *benchFlags, stdout, stderr io.Writer) error {
	node := bench.Node{URL: f.target, Token: f.token, Remote: true}
	target := f.target
	if f.target == "" {
		n, cleanup, err := f.startInProcess(ctx, stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		node = bench.Node{URL: n.URL(), Token: n.cfg.APIToken}
		target = "in-process sqlite"
		if f.databaseURL != "" {
			target = "in-process postgres"
		}
	}
	// A node just started does its start-up work (migrations checked,
	// caches filled, first maintenance passes): settle first.
	settle := min(5*time.Second, f.idle)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(settle):
	}
	res, err := bench.MeasureIdleNode(ctx, node, f.idle, f.measuresPostgres())
	if err != nil {
		return err
	}
	res.Target = target
	return writeBenchResult(stdout, f.jsonOut, res, func(w io.Writer) {
		fmt.Fprintf(w, "idle %s for %.0fs\n", res.Target, res.Seconds)
		fmt.Fprintf(w, "node CPU            %.2f%% of a core (%s)\n", res.NodeCorePct, res.NodeScope)
		if res.DBMeasured {
			fmt.Fprintf(w, "PostgreSQL CPU      %.2f%% of a core (every postgres process on this machine)\n", res.DBCorePct)
		}
	})
}
