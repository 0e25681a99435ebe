package bench

import (
	"fmt"
	"io"
)

// Result is one run's figures: what `herald bench --json` prints and
// WriteReport renders.
type Result struct {
	Target      string  `json:"target"` // "in-process sqlite", "in-process postgres" or the URL
	Synchronous string  `json:"sqlite_synchronous,omitempty"`
	Mode        string  `json:"mode"` // "single" or "batch"
	Batch       int     `json:"batch,omitempty"`
	Rate        float64 `json:"rate"` // 0: as fast as possible
	Concurrency int     `json:"concurrency"`
	Workers     int     `json:"workers,omitempty"`
	Fanout      int     `json:"fanout"`
	// Destination is the subscriptions' destination type ("webhook": the
	// local receiver); Broker, for the other types, the raw phase and the
	// figures beside it. For them Delivered, DeliveriesPerSec and the
	// latencies are the consumer's: publish→broker.
	Destination string             `json:"destination"`
	Broker      *DestinationResult `json:"broker,omitempty"`
	// Backlog is --backlog; BacklogAttempts counts the failing endpoint's
	// requests during the measured run.
	Backlog int64 `json:"backlog,omitempty"`
	// Samples (with --sample) show the run over time: throughput decay or
	// growing memory show up as trends.
	Samples         []Sample `json:"samples,omitempty"`
	BacklogAttempts int64    `json:"backlog_failed_attempts,omitempty"`
	// Bursts is --burst's side load (nil without it).
	Bursts *BurstResult `json:"bursts,omitempty"`
	// Windows sums up the samples' p99 (nil without --sample).
	Windows   *WindowSummary `json:"windows,omitempty"`
	PayloadB  int            `json:"payload_bytes"`
	FailRatio float64        `json:"fail_ratio"`
	DelayMs   float64        `json:"delay_ms"`

	Published        int64   `json:"published"`
	PublishErrors    int64   `json:"publish_errors"`
	PublishSeconds   float64 `json:"publish_seconds"`
	EventsPerSecond  float64 `json:"events_per_second"`
	PublishCallP50Ms float64 `json:"publish_call_p50_ms"`
	PublishCallP99Ms float64 `json:"publish_call_p99_ms"`
	DeliveriesWanted int64   `json:"deliveries_expected"`
	Delivered        int64   `json:"delivered"`
	FailedAttempts   int64   `json:"failed_attempts"`
	Dead             int64   `json:"dead"` // deliveries that exhausted their tiers during the run
	DeliverSeconds   float64 `json:"deliver_seconds"`
	DeliveriesPerSec float64 `json:"deliveries_per_second"`
	LatencyP50Ms     float64 `json:"latency_p50_ms"`
	LatencyP95Ms     float64 `json:"latency_p95_ms"`
	LatencyP99Ms     float64 `json:"latency_p99_ms"`
	Drain            bool    `json:"drain,omitempty"`
	// From the node's /metrics, when it has them: how many transactions
	// the run's events and outcomes took (group commit and batch sizes).
	IngestCommits    int64   `json:"ingest_commits,omitempty"`
	CompletionTxs    int64   `json:"completion_transactions,omitempty"`
	ClaimTxs         int64   `json:"claim_transactions,omitempty"`
	DirectDispatched int64   `json:"direct_dispatched,omitempty"`
	IngestCommitMs   float64 `json:"ingest_commit_mean_ms,omitempty"`
	// CPUPerDeliveryUs is user+system CPU seconds of the node's process
	// (process_cpu_seconds_total of its /metrics) per delivery, in µs,
	// from the start of publishing to the last delivery. CPUScope says
	// whose: "node" for --target, "process" for the in-process node,
	// whose process also runs the publishers and the receiver.
	CPUPerDeliveryUs float64 `json:"cpu_us_per_delivery,omitempty"`
	CPUScope         string  `json:"cpu_scope,omitempty"`
	// DBCPUPerDeliveryUs is the CPU of this machine's PostgreSQL server
	// processes per delivery over the same span (Config.PostgresCPU; 0
	// otherwise): the database's share of a delivery's cost (issue 26).
	DBCPUPerDeliveryUs float64 `json:"db_cpu_us_per_delivery,omitempty"`
	// Machine is this machine's CPU over the same span (steal: time the
	// hypervisor gave to other guests; see machine.go).
	Machine           *MachineUsage `json:"machine,omitempty"`
	Complete          bool          `json:"complete"` // every expected delivery arrived or died before --wait ran out
	Ceiling           CeilingResult `json:"ceiling"`
	CeilingRatio      float64       `json:"ceiling_ratio"` // deliveries_per_second / ceiling.per_second
	FirstPublishError string        `json:"first_publish_error,omitempty"`
}

// WriteReport writes r as `herald bench` prints it: one figure a line.
func WriteReport(w io.Writer, r *Result) {
	fmt.Fprintf(w, "target              %s", r.Target)
	if r.Synchronous != "" {
		fmt.Fprintf(w, " (synchronous=%s)", r.Synchronous)
	}
	fmt.Fprintln(w)
	if r.Broker != nil {
		fmt.Fprintf(w, "destination         %s at %s\n", r.Broker.Type, r.Broker.BrokerURL)
	}
	mode := "single publishes"
	if r.Mode == "batch" {
		mode = fmt.Sprintf("batch API, %d events per call", r.Batch)
	}
	rate := "as fast as possible"
	if r.Rate > 0 {
		rate = fmt.Sprintf("%.0f events/s", r.Rate)
	}
	fmt.Fprintf(w, "load                %s, %s, concurrency %d, fan-out %d, payload %d B, fail ratio %.2f, delay %.1f ms\n",
		mode, rate, r.Concurrency, r.Fanout, r.PayloadB, r.FailRatio, r.DelayMs)
	fmt.Fprintf(w, "published           %d events in %.2fs: %.0f events/s accepted (%d errors)\n",
		r.Published, r.PublishSeconds, r.EventsPerSecond, r.PublishErrors)
	fmt.Fprintf(w, "publish call        p50 %.2f ms, p99 %.2f ms\n", r.PublishCallP50Ms, r.PublishCallP99Ms)
	fmt.Fprintf(w, "delivered           %d of %d in %.2fs: %.0f deliveries/s (%d attempts failed on purpose, %d dead)\n",
		r.Delivered, r.DeliveriesWanted, r.DeliverSeconds, r.DeliveriesPerSec, r.FailedAttempts, r.Dead)
	if r.Broker != nil {
		fmt.Fprintf(w, "publish→broker      p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", r.LatencyP50Ms, r.LatencyP95Ms, r.LatencyP99Ms)
		writeBroker(w, r.Broker, r.CPUScope == "node")
	} else {
		fmt.Fprintf(w, "publish→delivery    p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", r.LatencyP50Ms, r.LatencyP95Ms, r.LatencyP99Ms)
	}
	if r.Ceiling.Requests > 0 {
		fmt.Fprintf(w, "raw HTTP ceiling    %.0f requests/s (%d requests, p50 %.2f ms, p99 %.2f ms)\n",
			r.Ceiling.PerSecond, r.Ceiling.Requests, r.Ceiling.P50Ms, r.Ceiling.P99Ms)
		fmt.Fprintf(w, "deliveries/ceiling  %.1f%%\n", 100*r.CeilingRatio)
	}
	// A destination run's in-process CPU is on its "process CPU" line.
	if r.CPUPerDeliveryUs > 0 && (r.Broker == nil || r.CPUScope == "node") {
		scope := "herald process (in-process: publishers and receiver included)"
		if r.CPUScope == "node" {
			scope = "target node only"
		}
		fmt.Fprintf(w, "CPU per delivery    %.0f µs (%s)\n", r.CPUPerDeliveryUs, scope)
	}
	if r.DBCPUPerDeliveryUs > 0 {
		fmt.Fprintf(w, "PostgreSQL CPU      %.0f µs per delivery (every postgres process on this machine)\n", r.DBCPUPerDeliveryUs)
	}
	if m := r.Machine; m != nil {
		fmt.Fprintf(w, "machine             %.0f%% busy, %.0f%% steal, %.0f%% idle (all cores)\n", m.BusyPct, m.StealPct, m.IdlePct)
	}
	if r.FirstPublishError != "" {
		fmt.Fprintf(w, "first publish error %s\n", r.FirstPublishError)
	}
	if r.IngestCommits > 0 || r.CompletionTxs > 0 {
		fmt.Fprintf(w, "transactions        %d ingest commits (%.1f events, %.2f ms each), %d completion transactions (%.1f outcomes each)\n",
			r.IngestCommits, float64(r.Published)/float64(max(r.IngestCommits, 1)), r.IngestCommitMs,
			r.CompletionTxs, float64(r.Delivered+r.FailedAttempts)/float64(max(r.CompletionTxs, 1)))
		fmt.Fprintf(w, "starts              %d by direct dispatch, the rest from %d claim transactions\n",
			r.DirectDispatched, r.ClaimTxs)
	}
	if len(r.Samples) > 0 {
		fmt.Fprintln(w, "samples             at_s  published/s  delivered/s  backlog  p99_ms  call_p99_ms  heap_mb  rss_mb")
		for _, sm := range r.Samples {
			fmt.Fprintf(w, "                    %5.0f  %11.0f  %11.0f  %7d  %6.1f  %11.1f  %7.1f  %6.1f\n",
				sm.AtS, sm.PublishedPerS, sm.DeliveredPerS, sm.Backlog, sm.LatencyP99Ms, sm.PublishCallP99Ms, sm.HeapMB, sm.RSSMB)
		}
	}
	if r.Windows != nil {
		fmt.Fprintf(w, "p99 per window      %d windows: median %.1f ms, worst %.1f ms; over 20 ms %d, over 50 ms %d, over 250 ms %d\n",
			r.Windows.Windows, r.Windows.MedianMs, r.Windows.WorstMs, r.Windows.Over20, r.Windows.Over50, r.Windows.Over250)
	}
	if b := r.Bursts; b != nil {
		fmt.Fprintf(w, "bursts              %d of %d events every %.0fs to a subscription of their own: %d published (%d errors), %d of %d delivered\n",
			b.Bursts, b.Size, b.EverySeconds, b.Published, b.PublishErrors, b.Delivered, b.DeliveriesExpected)
	}
	if r.Backlog > 0 {
		fmt.Fprintf(w, "backlog             %d events to an endpoint that always fails; %d failed attempts during the run\n",
			r.Backlog, r.BacklogAttempts)
	}
	if r.Drain {
		fmt.Fprintln(w, "drain               delivery was held until publishing ended: deliveries/s is delivery alone; latency includes the hold")
	}
	if !r.Complete {
		fmt.Fprintln(w, "INCOMPLETE: not every delivery arrived (or died) before --wait ran out")
	}
}

// writeBroker writes a --destination run's broker lines.
func writeBroker(w io.Writer, d *DestinationResult, remote bool) {
	raw := d.Raw
	if raw.Messages > 0 {
		fmt.Fprintf(w, "raw publish-with-ack %.0f messages/s (%d messages in %.2fs from %d workers, p50 %.2f ms, p99 %.2f ms; broker client alone, no consumer)\n",
			raw.PerSecond, raw.Messages, raw.Seconds, raw.Concurrency, raw.P50Ms, raw.P99Ms)
		fmt.Fprintf(w, "herald/raw          %.0f ÷ %.0f = %.2f\n", d.HeraldPerSecond, raw.PerSecond, d.Ratio)
	}
	if raw.Error != "" {
		fmt.Fprintf(w, "raw first error     %s\n", raw.Error)
	}
	if d.CPUPerDeliveryUs > 0 {
		whose := "publishers, node and consumer"
		if remote {
			whose = "publishers and consumer; the node's own is below"
		}
		fmt.Fprintf(w, "process CPU         %.0f µs per delivery (%s)", d.CPUPerDeliveryUs, whose)
		if raw.Messages > 0 {
			fmt.Fprintf(w, "; raw %.0f µs per message", raw.CPUPerMessageUs)
		}
		if d.ExtraCPUPerDeliveryUs != 0 {
			fmt.Fprintf(w, "; herald's extra %.0f µs", d.ExtraCPUPerDeliveryUs)
		}
		fmt.Fprintln(w)
	}
	if d.Duplicates > 0 || d.Invalid > 0 {
		fmt.Fprintf(w, "consumer            %d duplicates, %d without a readable stamp\n", d.Duplicates, d.Invalid)
	}
}

// BurstResult is the side load of --burst.
type BurstResult struct {
	Size               int64   `json:"size"`
	EverySeconds       float64 `json:"every_s"`
	Bursts             int64   `json:"bursts"`
	Published          int64   `json:"published"`
	PublishErrors      int64   `json:"publish_errors"`
	DeliveriesExpected int64   `json:"deliveries_expected"`
	Delivered          int64   `json:"delivered"`
}

// WindowSummary is the p99 of the measured load per --sample window: how
// many windows there were, their worst p99, and how many were over 20, 50
// and 250 ms (issue 28's soak goals: ≤ 50 ms in 95% of windows on
// PostgreSQL, never above 250 ms).
type WindowSummary struct {
	Windows  int     `json:"windows"`
	WorstMs  float64 `json:"worst_p99_ms"`
	MedianMs float64 `json:"median_p99_ms"`
	Over20   int     `json:"over_20ms"`
	Over50   int     `json:"over_50ms"`
	Over250  int     `json:"over_250ms"`
}

// summarizeWindows fills r.Windows from r.Samples (windows that delivered
// nothing are left out).
func summarizeWindows(r *Result) {
	var p99s []float64
	w := &WindowSummary{}
	for _, s := range r.Samples {
		if s.DeliveredPerS == 0 {
			continue
		}
		p99s = append(p99s, s.LatencyP99Ms)
		w.WorstMs = max(w.WorstMs, s.LatencyP99Ms)
		if s.LatencyP99Ms > 20 {
			w.Over20++
		}
		if s.LatencyP99Ms > 50 {
			w.Over50++
		}
		if s.LatencyP99Ms > 250 {
			w.Over250++
		}
	}
	if len(p99s) == 0 {
		return
	}
	w.Windows, w.MedianMs = len(p99s), median(p99s)
	r.Windows = w
}
