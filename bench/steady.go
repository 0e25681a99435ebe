package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// DefaultSteadyCounts are the events of the 200/s, 1,000/s and saturated
// phases of the steady-rate check.
var DefaultSteadyCounts = [3]int64{3_000, 10_000, 20_000}

// Issue 26's goals, per delivery: the node's CPU at most SteadyRatioGoal200
// and SteadyRatioGoal1000 times its saturated figure, PostgreSQL's own CPU
// at most SteadyDBGoal200Us and SteadyDBGoal1000Us.
const (
	SteadyRatioGoal200  = 3.0
	SteadyRatioGoal1000 = 2.0
	SteadyDBGoal200Us   = 600.0
	SteadyDBGoal1000Us  = 300.0
)

// SteadyPhases returns the steady-rate check (issue 26): counts[0] events
// at 200/s, counts[1] at 1,000/s, then counts[2] as fast as possible, all
// single publishes from 64 publishers. The low rates come first: a node
// that has just been saturated keeps every core for 30 s (serve
// --adapt-procs, ADR 0037), which would raise the low rates' figures.
func SteadyPhases(counts [3]int64, payload int) []Phase {
	base := Config{Payload: payload, Fanout: 1, Concurrency: 64, Wait: time.Minute}
	r200, r1000, full := base, base, base
	r200.Count, r200.Rate = counts[0], 200
	r1000.Count, r1000.Rate = counts[1], 1000
	full.Count = counts[2]
	return []Phase{{"200/s", r200}, {"1,000/s", r1000}, {"saturated", full}}
}

// SteadyRow is one phase of the steady-rate check and its ratios to the
// saturated phase (0 when a figure is missing).
type SteadyRow struct {
	PhaseResult
	// NodeRatio is the node's CPU per delivery over the saturated
	// phase's; DBRatio PostgreSQL's.
	NodeRatio float64 `json:"node_cpu_ratio_to_saturated"`
	DBRatio   float64 `json:"db_cpu_ratio_to_saturated,omitempty"`
}

// SteadyResult is the `herald bench --steady` report.
type SteadyResult struct {
	Target string `json:"target"`
	// CPUScope is what the CPU figures cover: "node" for a --target, or
	// "process" (publishers, receiver and node) in-process.
	CPUScope string      `json:"cpu_scope"`
	Rows     []SteadyRow `json:"phases"`
	// Floor is the same phases through a bare relay on the same store
	// (--floor: Relay, RunFloor), what this machine charges per delivery
	// before any of herald's work; FloorStore names its store.
	Floor      []FloorRow `json:"floor,omitempty"`
	FloorStore string     `json:"floor_store,omitempty"`
}

// NewSteadyResult computes each phase's ratios to the last phase, the
// saturated one.
func NewSteadyResult(target, cpuScope string, phases []PhaseResult) SteadyResult {
	res := SteadyResult{Target: target, CPUScope: cpuScope}
	var full PhaseResult
	if n := len(phases); n > 0 {
		full = phases[n-1]
	}
	for _, p := range phases {
		row := SteadyRow{PhaseResult: p}
		if full.CPUPerDeliveryUs > 0 {
			row.NodeRatio = p.CPUPerDeliveryUs / full.CPUPerDeliveryUs
		}
		if full.DBCPUPerDeliveryUs > 0 {
			row.DBRatio = p.DBCPUPerDeliveryUs / full.DBCPUPerDeliveryUs
		}
		res.Rows = append(res.Rows, row)
	}
	return res
}

// WriteSteadyReport prints the steady-rate check as a table, each rate's
// CPU beside issue 26's goal for it.
func WriteSteadyReport(w io.Writer, res SteadyResult) {
	fmt.Fprintf(w, "herald bench --steady against %s (CPU: %s)\n", res.Target, res.CPUScope)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tdeliveries/s\tp50 ms\tp99 ms\tCPU µs/delivery\t× saturated\tPostgreSQL µs/delivery\tlost\tgoal\t")
	for _, r := range res.Rows {
		db := "-"
		if r.DBCPUPerDeliveryUs > 0 {
			db = fmt.Sprintf("%.0f", r.DBCPUPerDeliveryUs)
		}
		ratio := "-"
		if r.NodeRatio > 0 {
			ratio = fmt.Sprintf("%.1f", r.NodeRatio)
		}
		goal := ""
		switch r.Name {
		case "200/s":
			goal = fmt.Sprintf("≤ %.0f× saturated, PostgreSQL ≤ %.0f µs", SteadyRatioGoal200, SteadyDBGoal200Us)
		case "1,000/s":
			goal = fmt.Sprintf("≤ %.0f× saturated, PostgreSQL ≤ %.0f µs", SteadyRatioGoal1000, SteadyDBGoal1000Us)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.1f\t%.0f\t%s\t%s\t%d\t%s\t\n",
			r.Name, r.DeliveriesPerSec, r.LatencyP50Ms, r.LatencyP99Ms, r.CPUPerDeliveryUs, ratio, db, r.Lost, goal)
	}
	_ = tw.Flush()
	if len(res.Floor) == 0 {
		return
	}
	fmt.Fprintf(w, "\nthe floor, a bare relay on %s: HTTP in, one insert, 202, HTTP out, nothing else; same phases\n", res.FloorStore)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tdeliveries/s\tp99 ms\tCPU µs/delivery\t× saturated\tPostgreSQL µs/delivery\therald over the floor, µs\t")
	for i, r := range res.Floor {
		db, over := "-", "-"
		if r.DBCPUPerDeliveryUs > 0 {
			db = fmt.Sprintf("%.0f", r.DBCPUPerDeliveryUs)
		}
		if i < len(res.Rows) && res.Rows[i].CPUPerDeliveryUs > 0 && r.CPUPerDeliveryUs > 0 {
			over = fmt.Sprintf("%+.0f", res.Rows[i].CPUPerDeliveryUs-r.CPUPerDeliveryUs)
			if res.Rows[i].DBCPUPerDeliveryUs > 0 && r.DBCPUPerDeliveryUs > 0 {
				over += fmt.Sprintf(" (PostgreSQL %+.0f)", res.Rows[i].DBCPUPerDeliveryUs-r.DBCPUPerDeliveryUs)
			}
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.0f\t%.1f\t%s\t%s\t\n", r.Name, r.DeliveriesPerSec, r.LatencyP99Ms, r.CPUPerDeliveryUs, r.Ratio, db, over)
	}
	_ = tw.Flush()
}
