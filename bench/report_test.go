package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// The report's lines are what docs/benchmarks.md quotes: pinned here.
func TestWriteReport(t *testing.T) {
	t.Parallel()
	r := &Result{
		Target: "in-process sqlite", Synchronous: "full", Mode: "batch", Batch: 100, Rate: 300, Concurrency: 4,
		Fanout: 2, PayloadB: 1024, FailRatio: 0.1, DelayMs: 1.5,
		Published: 900, PublishErrors: 1, PublishSeconds: 3.01, EventsPerSecond: 299, PublishCallP50Ms: 0.92, PublishCallP99Ms: 4.14,
		DeliveriesWanted: 1800, Delivered: 1700, FailedAttempts: 99, Dead: 2, DeliverSeconds: 3.08, DeliveriesPerSec: 552,
		LatencyP50Ms: 1.65, LatencyP95Ms: 102.36, LatencyP99Ms: 103.45,
		Ceiling: CeilingResult{Requests: 2000, PerSecond: 25713, P50Ms: 0.1, P99Ms: 2.25}, CeilingRatio: 0.0215,
		CPUPerDeliveryUs: 1533, CPUScope: "process", FirstPublishError: "forbidden: no",
		IngestCommits: 900, IngestCommitMs: 0.65, CompletionTxs: 1027, DirectDispatched: 1018, ClaimTxs: 480,
		Samples: []Sample{{AtS: 1, PublishedPerS: 300, DeliveredPerS: 297, Backlog: 3, LatencyP99Ms: 104.9, PublishCallP99Ms: 3.7, HeapMB: 6.8, RSSMB: 42.1}},
		Backlog: 200, BacklogAttempts: 456,
		Drain:    true,
		Complete: false,
	}
	var b bytes.Buffer
	WriteReport(&b, r)
	require.Equal(t, `target              in-process sqlite (synchronous=full)
load                batch API, 100 events per call, 300 events/s, concurrency 4, fan-out 2, payload 1024 B, fail ratio 0.10, delay 1.5 ms
published           900 events in 3.01s: 299 events/s accepted (1 errors)
publish call        p50 0.92 ms, p99 4.14 ms
delivered           1700 of 1800 in 3.08s: 552 deliveries/s (99 attempts failed on purpose, 2 dead)
publish→delivery    p50 1.65 ms, p95 102.36 ms, p99 103.45 ms
raw HTTP ceiling    25713 requests/s (2000 requests, p50 0.10 ms, p99 2.25 ms)
deliveries/ceiling  2.1%
CPU per delivery    1533 µs (herald process (in-process: publishers and receiver included))
first publish error forbidden: no
transactions        900 ingest commits (1.0 events, 0.65 ms each), 1027 completion transactions (1.8 outcomes each)
starts              1018 by direct dispatch, the rest from 480 claim transactions
samples             at_s  published/s  delivered/s  backlog  p99_ms  call_p99_ms  heap_mb  rss_mb
                        1          300          297        3   104.9          3.7      6.8    42.1
backlog             200 events to an endpoint that always fails; 456 failed attempts during the run
drain               delivery was held until publishing ended: deliveries/s is delivery alone; latency includes the hold
INCOMPLETE: not every delivery arrived (or died) before --wait ran out
`, b.String())

	b.Reset()
	WriteReport(&b, &Result{Target: "http://127.0.0.1:8080", Mode: "single", Concurrency: 64, Fanout: 1, CPUPerDeliveryUs: 400, CPUScope: "node", Complete: true})
	require.Contains(t, b.String(), "load                single publishes, as fast as possible,")
	require.Contains(t, b.String(), "CPU per delivery    400 µs (target node only)\n")
	require.NotContains(t, b.String(), "raw HTTP ceiling")
	require.NotContains(t, b.String(), "INCOMPLETE")
}

// A --destination run: the broker lines replace the HTTP ceiling's.
func TestWriteReportDestination(t *testing.T) {
	t.Parallel()
	r := &Result{
		Target: "in-process sqlite", Synchronous: "full", Mode: "single", Rate: 1000, Concurrency: 64, Fanout: 1, PayloadB: 1024,
		Destination: "redis", Published: 10000, PublishSeconds: 10, EventsPerSecond: 1000, DeliveriesWanted: 10000, Delivered: 10000,
		DeliverSeconds: 10.01, DeliveriesPerSec: 999, LatencyP50Ms: 2.5, LatencyP95Ms: 6, LatencyP99Ms: 9.75,
		CPUPerDeliveryUs: 700, CPUScope: "process", Complete: true,
		Broker: &DestinationResult{
			Type: "redis", BrokerURL: "redis://127.0.0.1:6379/0",
			Raw:             RawResult{Concurrency: 64, Messages: 50000, Seconds: 2.5, PerSecond: 20000, P50Ms: 3, P99Ms: 8, CPUPerMessageUs: 45},
			HeraldPerSecond: 999, Ratio: 0.04995, PublishToBrokerP50Ms: 2.5, PublishToBrokerP99Ms: 9.75,
			CPUPerDeliveryUs: 702, ExtraCPUPerDeliveryUs: 657, Duplicates: 1,
		},
	}
	var b bytes.Buffer
	WriteReport(&b, r)
	require.Equal(t, `target              in-process sqlite (synchronous=full)
destination         redis at redis://127.0.0.1:6379/0
load                single publishes, 1000 events/s, concurrency 64, fan-out 1, payload 1024 B, fail ratio 0.00, delay 0.0 ms
published           10000 events in 10.00s: 1000 events/s accepted (0 errors)
publish call        p50 0.00 ms, p99 0.00 ms
delivered           10000 of 10000 in 10.01s: 999 deliveries/s (0 attempts failed on purpose, 0 dead)
publish→broker      p50 2.50 ms, p95 6.00 ms, p99 9.75 ms
raw publish-with-ack 20000 messages/s (50000 messages in 2.50s from 64 workers, p50 3.00 ms, p99 8.00 ms; broker client alone, no consumer)
herald/raw          999 ÷ 20000 = 0.05
process CPU         702 µs per delivery (publishers, node and consumer); raw 45 µs per message; herald's extra 657 µs
consumer            1 duplicates, 0 without a readable stamp
`, b.String())
}

func TestWritePushReport(t *testing.T) {
	t.Parallel()
	r := &PushResult{
		Idle: &IdleResult{Connections: 50, Open: 50, Seconds: 0.1, PerSecond: 958, RSSBeforeMB: 29, RSSAfterMB: 32,
			BytesPerConn: 61194, StackPerConn: 11141, HeapPerConn: 22118, NoFileLimit: 20000},
		Rate: &RateResult{UserAgents: 4, TargetRate: 200, Sent: 100, Seconds: 0.5, PerSecond: 194, P50Ms: 0.35, P99Ms: 0.67, MaxMs: 0.67, NodeCPUMicros: 300},
		Max: &RateResult{UserAgents: 4, Sent: 2334, Seconds: 0.5, PerSecond: 4663, P50Ms: 0.28, P99Ms: 3.31, MaxMs: 18.78, NodeCPUMicros: 120,
			BenchCPUMicros: 110, Machine: &MachineUsage{BusyPct: 88, StealPct: 2, IdlePct: 10},
			Ceiling: &CeilingResult{PerSecond: 14467, CPUMicros: 58}, CeilingRatio: 0.32, CeilingRatioBound: 58.0 / 110},
		Drain: &DrainResult{Messages: 25, Received: 25, Ms: 4.2},
	}
	var b bytes.Buffer
	WritePushReport(&b, r)
	require.Equal(t, `idle       50 connections in 0.1s (958/s), 50 still open, 0 failed
           node RSS 29 MB → 32 MB: 61194 bytes per connection (Go stacks 11141, heap 22118; open-file limit 20000)
rate       4 user agents: 100 messages in 0.5s = 194/s (target 200/s), 0 errors; sender→UA p50 0.35 ms p99 0.67 ms max 0.67 ms; node CPU 300 µs/message
max        4 user agents: 2334 messages in 0.5s = 4663/s (target 0/s), 0 errors; sender→UA p50 0.28 ms p99 3.31 ms max 18.78 ms; node CPU 120 µs/message, bench 110 µs/message
           machine 88% busy, 2% steal, 10% idle (all cores)
           raw HTTP ceiling 14467 requests/s: messages/ceiling 0.32; 58 µs of CPU a request (client and server), so a node costing nothing would reach 0.53
drain      25 stored messages received in 4.2 ms
`, b.String())
}

// The aggregate line of /proc/stat becomes busy, steal and idle shares.
func TestMachineUsage(t *testing.T) {
	a := parseMachineTicks("cpu  100 0 50 800 50 0 0 0 0 0")
	b := parseMachineTicks("cpu  400 0 150 1100 100 0 0 200 0 0")
	u := usageSince(a, b)
	require.NotNil(t, u)
	// busy 300+100 = 400, steal 200, idle 300+50 = 350 of 950.
	require.InDelta(t, 100*400.0/950, u.BusyPct, 1e-9)
	require.InDelta(t, 100*200.0/950, u.StealPct, 1e-9)
	require.InDelta(t, 100*350.0/950, u.IdlePct, 1e-9)
	require.Nil(t, usageSince(a, a), "no time passed")
	require.Nil(t, usageSince(parseMachineTicks("intr 1 2"), b), "not the cpu line")
	require.False(t, parseMachineTicks("cpu 1 2 x 4 5 6 7 8").ok)
}
