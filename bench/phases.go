package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/heraldhq/herald/client"
)

// The after-load check (`herald bench --phases N`, issue 28): a node that
// has just worked, not a fresh one, is what users run. Each run drives one
// node through three phases in a row and records each phase's figures; N
// runs show the spread, and the worst run is the one to report.
//
// The phases, in order (64 publishers, 1 KiB, fan-out 1 unless said):
//   - single: 30,000 single publishes as fast as possible;
//   - batch:  50,000 through the batch API, 100 a call, 8 publishers;
//   - rate:   10,000 at a fixed 1,000/s — the latency that must hold.

// Phase is one phase of a phases run.
type Phase struct {
	Name string
	Config
}

// DefaultPhaseCounts are the events of the single, batch and rate phases.
var DefaultPhaseCounts = [3]int64{30_000, 50_000, 10_000}

// DefaultPhases returns the three phases with counts events each (zero:
// the phase is skipped). payload is the event data size.
func DefaultPhases(counts [3]int64, payload int) []Phase {
	base := Config{Payload: payload, Fanout: 1, Wait: time.Minute, Sample: time.Second}
	single, batch, rate := base, base, base
	single.Count, single.Concurrency = counts[0], 64
	batch.Count, batch.Concurrency, batch.Batch = counts[1], 8, 100
	rate.Count, rate.Concurrency, rate.Rate = counts[2], 64, 1000
	var out []Phase
	for _, p := range []Phase{{"single", single}, {"batch", batch}, {"rate", rate}} {
		if p.Count > 0 {
			out = append(out, p)
		}
	}
	return out
}

// PhaseResult is one phase of one run.
type PhaseResult struct {
	Name             string  `json:"name"`
	Published        int64   `json:"published"`
	Delivered        int64   `json:"delivered"`
	Lost             int64   `json:"lost"` // accepted, neither delivered nor dead when the phase ended
	DeliveriesPerSec float64 `json:"deliveries_per_second"`
	LatencyP50Ms     float64 `json:"latency_p50_ms"`
	LatencyP99Ms     float64 `json:"latency_p99_ms"`
	// WorstSecondP99Ms is the highest p99 of any one second of the phase.
	WorstSecondP99Ms float64 `json:"worst_second_p99_ms"`
	// IngestCommitMs and CompletionMs are the node's mean ingest commit
	// and completion transaction times during the phase, and Claims its
	// claim transactions (the node's own metrics; zero when /metrics is
	// closed).
	IngestCommitMs   float64 `json:"ingest_commit_mean_ms"`
	CompletionMs     float64 `json:"completion_mean_ms"`
	Claims           int64   `json:"claim_transactions"`
	CPUPerDeliveryUs float64 `json:"cpu_us_per_delivery,omitempty"`
	// DBCPUPerDeliveryUs is PostgreSQL's (Result.DBCPUPerDeliveryUs).
	DBCPUPerDeliveryUs float64 `json:"db_cpu_us_per_delivery,omitempty"`
	// DB is what PostgreSQL did during the phase (nil on SQLite or when
	// the database is not observed).
	DB      *DBObservation `json:"db,omitempty"`
	Machine *MachineUsage  `json:"machine,omitempty"`
	Samples []Sample       `json:"samples,omitempty"`
}

// PhasesRun is one run: its phases in order.
type PhasesRun struct {
	Run    int           `json:"run"`
	Phases []PhaseResult `json:"phases"`
}

// PhasesResult is the whole `--phases` report.
type PhasesResult struct {
	Target string `json:"target"`
	// Counts are the events of the single, batch and rate phases.
	Counts [3]int64    `json:"counts"`
	Runs   []PhasesRun `json:"runs"`
	// Summary, per phase name: median, worst and spread over the runs.
	Summary []PhaseSummary `json:"summary"`
}

// PhaseSummary sums one phase up over the runs.
type PhaseSummary struct {
	Name string `json:"name"`
	// Throughput: the median deliveries/s and the largest deviation of
	// one run from it, in percent (the goal: within ±20%).
	MedianPerSec      float64 `json:"median_deliveries_per_second"`
	MaxDeviationPct   float64 `json:"max_deviation_pct"`
	MedianP99Ms       float64 `json:"median_p99_ms"`
	WorstP99Ms        float64 `json:"worst_p99_ms"`
	WorstSecondP99Ms  float64 `json:"worst_second_p99_ms"`
	Lost              int64   `json:"lost"`
	RunsOverP99Goal   int     `json:"runs_over_p99_goal,omitempty"`
	P99GoalMs         float64 `json:"p99_goal_ms,omitempty"`
	CheckpointsDuring int64   `json:"checkpoints_during,omitempty"`
}

// RunPhases runs the phases once against node, which the caller started
// and stops. watch, when not nil, observes the node's PostgreSQL during
// each phase.
func RunPhases(ctx context.Context, phases []Phase, node Node, watch *PGWatch, progress io.Writer) ([]PhaseResult, error) {
	// Each phase reuses the node: its own stop must not stop it.
	same := func(context.Context) (Node, func(), error) { return node, func() {}, nil }
	api := client.New(node.URL, node.Token)
	var out []PhaseResult
	for _, ph := range phases {
		if progress != nil {
			fmt.Fprintf(progress, "phase %s…\n", ph.Name)
		}
		var mark PGMark
		if watch != nil {
			mark = watch.Mark()
		}
		before := nodeCounters(ctx, api)
		res, err := Run(ctx, ph.Config, same)
		if err != nil {
			return out, fmt.Errorf("phase %s: %w", ph.Name, err)
		}
		pr := PhaseResult{
			Name: ph.Name, Published: res.Published, Delivered: res.Delivered,
			Lost:             max(res.DeliveriesWanted-res.Delivered-res.Dead, 0),
			DeliveriesPerSec: res.DeliveriesPerSec, LatencyP50Ms: res.LatencyP50Ms, LatencyP99Ms: res.LatencyP99Ms,
			CPUPerDeliveryUs: res.CPUPerDeliveryUs, DBCPUPerDeliveryUs: res.DBCPUPerDeliveryUs, Samples: res.Samples,
			Machine: res.Machine,
		}
		after := nodeCounters(ctx, api)
		if n := after.ingest - before.ingest; n > 0 {
			pr.IngestCommitMs = (after.ingestSumS - before.ingestSumS) * 1000 / float64(n)
		}
		if n := after.completion - before.completion; n > 0 {
			pr.CompletionMs = (after.completionSumS - before.completionSumS) * 1000 / float64(n)
		}
		pr.Claims = after.claims - before.claims
		for _, s := range res.Samples {
			pr.WorstSecondP99Ms = max(pr.WorstSecondP99Ms, s.LatencyP99Ms)
		}
		if watch != nil {
			obs := watch.Since(mark)
			pr.DB = &obs
		}
		out = append(out, pr)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// SummarizePhases fills res.Summary. p99Goal, when > 0, counts the runs
// whose rate phase p99 is above it.
func SummarizePhases(res *PhasesResult, p99Goal float64) {
	res.Summary = nil
	if len(res.Runs) == 0 {
		return
	}
	for i, first := range res.Runs[0].Phases {
		s := PhaseSummary{Name: first.Name}
		var rates, p99s []float64
		for _, run := range res.Runs {
			if i >= len(run.Phases) {
				continue
			}
			p := run.Phases[i]
			rates = append(rates, p.DeliveriesPerSec)
			p99s = append(p99s, p.LatencyP99Ms)
			s.WorstP99Ms = max(s.WorstP99Ms, p.LatencyP99Ms)
			s.WorstSecondP99Ms = max(s.WorstSecondP99Ms, p.WorstSecondP99Ms)
			s.Lost += p.Lost
			if p.DB != nil {
				s.CheckpointsDuring += p.DB.Checkpoints
			}
			if p99Goal > 0 && p.Name == "rate" && p.LatencyP99Ms > p99Goal {
				s.RunsOverP99Goal++
			}
		}
		s.MedianPerSec, s.MedianP99Ms = median(rates), median(p99s)
		for _, r := range rates {
			if s.MedianPerSec > 0 {
				s.MaxDeviationPct = max(s.MaxDeviationPct, 100*math.Abs(r-s.MedianPerSec)/s.MedianPerSec)
			}
		}
		if first.Name == "rate" && p99Goal > 0 {
			s.P99GoalMs = p99Goal
		}
		res.Summary = append(res.Summary, s)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WritePhasesReport prints the runs as a table, then the summary.
func WritePhasesReport(w io.Writer, res *PhasesResult) {
	fmt.Fprintf(w, "herald bench --phases: %d run(s) against %s\n", len(res.Runs), res.Target)
	fmt.Fprintf(w, "each run: single %d (64 publishers) → batch %d (100 a call, 8 publishers) → rate %d at 1,000/s, on the same node\n",
		res.Counts[0], res.Counts[1], res.Counts[2])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tsingle/s\tsingle p99 ms\tbatch/s\tbatch p99 ms\trate p50 ms\trate p99 ms\trate worst 1 s p99\tcommit/completion ms (rate)\tlost\tcheckpoints\tautovacuums\ttop wait (rate)\tsteal % (rate)\t")
	observed := false
	for _, run := range res.Runs {
		for _, p := range run.Phases {
			observed = observed || p.DB != nil
		}
	}
	for _, run := range res.Runs {
		byName := map[string]PhaseResult{}
		var lost, ckpt, av int64
		for _, p := range run.Phases {
			byName[p.Name] = p
			lost += p.Lost
			if p.DB != nil {
				ckpt += p.DB.Checkpoints
				av += p.DB.AutovacuumRuns()
			}
		}
		row := fmt.Sprintf("%d\t", run.Run)
		for _, name := range []string{"single", "batch"} {
			if p, ok := byName[name]; ok {
				row += fmt.Sprintf("%.0f\t%.1f\t", p.DeliveriesPerSec, p.LatencyP99Ms)
			} else {
				row += "-\t-\t"
			}
		}
		top := "-"
		if p, ok := byName["rate"]; ok {
			row += fmt.Sprintf("%.1f\t%.1f\t%.1f\t%.2f/%.2f\t", p.LatencyP50Ms, p.LatencyP99Ms, p.WorstSecondP99Ms,
				p.IngestCommitMs, p.CompletionMs)
			if p.DB != nil {
				top = p.DB.TopWait()
			}
		} else {
			row += "-\t-\t-\t-\t"
		}
		if observed {
			row += fmt.Sprintf("%d\t%d\t%d\t%s\t", lost, ckpt, av, top)
		} else {
			row += fmt.Sprintf("%d\t-\t-\t-\t", lost)
		}
		if p, ok := byName["rate"]; ok && p.Machine != nil {
			row += fmt.Sprintf("%.0f\t", p.Machine.StealPct)
		} else {
			row += "-\t"
		}
		fmt.Fprintln(tw, row)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, s := range res.Summary {
		fmt.Fprintf(w, "%-6s median %.0f deliveries/s (largest deviation %.0f%%), p99 median %.1f ms, worst %.1f ms, worst second %.1f ms, lost %d",
			s.Name, s.MedianPerSec, s.MaxDeviationPct, s.MedianP99Ms, s.WorstP99Ms, s.WorstSecondP99Ms, s.Lost)
		if s.P99GoalMs > 0 {
			fmt.Fprintf(w, "; runs over the %.0f ms goal: %d of %d", s.P99GoalMs, s.RunsOverP99Goal, len(res.Runs))
		}
		fmt.Fprintln(w)
	}
}
