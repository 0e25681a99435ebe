package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/bench"
)

// Bench limits: a run is bounded in size and time.
const (
	benchMaxCount       = 10_000_000
	benchMaxDuration    = 10 * time.Minute
	benchMaxConcurrency = 1024
	benchMaxFanout      = 100
	benchMaxPayload     = 256 << 10
	benchMaxBatch       = 1000 // the batch API's limit
	benchMaxBacklog     = 1_000_000
)

type benchFlags struct {
	target, token           string
	databaseURL             string
	sqliteSync              string
	workers                 int
	tiers                   string
	ingestCommitters        int
	ingestFlush             time.Duration
	direct                  bool
	backlog                 int64
	rate                    float64
	count                   int64
	duration                time.Duration
	payload                 int
	concurrency             int
	batch                   int
	fanout                  int
	failRatio               float64
	delay                   time.Duration
	wait                    time.Duration
	ceilingMax              time.Duration
	jsonOut, progress, keep bool
	drain                   bool
	cpuProfile              string
	traceFile               string
	sample                  time.Duration
}

// benchResult is what `herald bench --json` prints.
type benchResult struct {
	Target      string  `json:"target"` // "in-process sqlite", "in-process postgres" or the URL
	Synchronous string  `json:"sqlite_synchronous,omitempty"`
	Mode        string  `json:"mode"` // "single" or "batch"
	Batch       int     `json:"batch,omitempty"`
	Rate        float64 `json:"rate"` // 0: as fast as possible
	Concurrency int     `json:"concurrency"`
	Workers     int     `json:"workers,omitempty"`
	Fanout      int     `json:"fanout"`
	// Backlog is --backlog; BacklogAttempts counts the failing endpoint's
	// requests during the measured run.
	Backlog int64 `json:"backlog,omitempty"`
	// Samples (with --sample) show the run over time: throughput decay or
	// growing memory show up as trends.
	Samples         []benchSample `json:"samples,omitempty"`
	BacklogAttempts int64         `json:"backlog_failed_attempts,omitempty"`
	backlogAttempts func() int64
	PayloadB        int     `json:"payload_bytes"`
	FailRatio       float64 `json:"fail_ratio"`
	DelayMs         float64 `json:"delay_ms"`

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
	CPUPerDeliveryUs  float64             `json:"cpu_us_per_delivery,omitempty"`
	CPUScope          string              `json:"cpu_scope,omitempty"`
	Complete          bool                `json:"complete"` // every expected delivery arrived or died before --wait ran out
	Ceiling           bench.CeilingResult `json:"ceiling"`
	CeilingRatio      float64             `json:"ceiling_ratio"` // deliveries_per_second / ceiling.per_second
	FirstPublishError string              `json:"first_publish_error,omitempty"`
}

func cmdBench(ctx context.Context, args []string) error {
	return runBench(ctx, args, os.Stdout, os.Stderr)
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "push" {
		return runBenchPush(ctx, args[1:], stdout, stderr)
	}
	var f benchFlags
	fs := flag.NewFlagSet("herald bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.target, "target", "", "URL of a running herald (loopback only; it needs --dev to deliver to the local receiver); default: start one in-process")
	fs.StringVar(&f.token, "token", "", "API token of --target")
	fs.StringVar(&f.databaseURL, "database-url", "", "in-process node on PostgreSQL (loopback only; runs in a fresh schema, dropped afterwards); default a temporary SQLite store")
	fs.StringVar(&f.sqliteSync, "sqlite-synchronous", "full", "in-process SQLite synchronous mode: full or normal")
	fs.IntVar(&f.workers, "workers", 64, "in-process node: concurrent delivery requests")
	fs.StringVar(&f.tiers, "tiers", "0s,100ms,500ms,1s,2s", "in-process node: retry tiers (short, so --fail-ratio runs finish)")
	fs.IntVar(&f.ingestCommitters, "ingest-committers", 0, "in-process node: group committers (default as serve)")
	fs.DurationVar(&f.ingestFlush, "ingest-flush-interval", 0, "in-process node: group commit wait")
	fs.BoolVar(&f.direct, "direct-dispatch", true, "in-process node: send fresh deliveries without a claim when workers are free")
	fs.Float64Var(&f.rate, "rate", 0, "events per second to publish (0: as fast as possible)")
	fs.Int64Var(&f.count, "count", 10000, "events to publish (with --duration: at most this many; default then 10,000,000)")
	fs.DurationVar(&f.duration, "duration", 0, "publish for this long instead of a fixed count (at most 10m)")
	fs.IntVar(&f.payload, "payload", 1024, "bytes of event data")
	fs.IntVar(&f.concurrency, "concurrency", 64, "concurrent publish calls (and connections of the raw HTTP ceiling run)")
	fs.IntVar(&f.batch, "batch", 0, "publish through the batch API, N events per call (0: single publishes)")
	fs.IntVar(&f.fanout, "fanout", 1, "subscriptions matching every event (deliveries per event)")
	fs.Float64Var(&f.failRatio, "fail-ratio", 0, "share of deliveries the receiver answers 500 (0..0.9)")
	fs.Int64Var(&f.backlog, "backlog", 0, "head-of-line test: first publish this many events to a second subscription whose endpoint always answers 500, so they go through the retry tiers during the run (the measured subscription is unaffected; 0..1,000,000)")
	fs.DurationVar(&f.delay, "delay", 0, "receiver response delay")
	fs.DurationVar(&f.wait, "wait", time.Minute, "how long to wait for deliveries after publishing ends")
	fs.DurationVar(&f.ceilingMax, "ceiling-time", 5*time.Second, "longest raw HTTP ceiling run (0 skips it)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object instead of the report")
	fs.BoolVar(&f.progress, "progress", isTerminal(os.Stderr), "progress line on stderr every 500ms (default when stderr is a terminal)")
	fs.BoolVar(&f.drain, "drain", false, "in-process only: hold delivery until everything is published, then measure delivery alone (burn-down; latency then includes the hold)")
	fs.BoolVar(&f.keep, "keep", false, "keep the in-process node's data directory or PostgreSQL schema")
	fs.DurationVar(&f.sample, "sample", 0, "record throughput, latency and memory every interval (long-run stability; 0: off; at least 1s)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (publisher, node and receiver) to this file")
	fs.StringVar(&f.traceFile, "trace", "", "write a Go execution trace of the whole run to this file (go tool trace; for latency: where goroutines waited)")
	if err := fs.Parse(args); err != nil {
		return usageError{err} // exit code 2
	}
	countSet := false
	fs.Visit(func(fl *flag.Flag) { countSet = countSet || fl.Name == "count" })
	if f.duration > 0 && !countSet {
		f.count = benchMaxCount // --duration alone: the time bounds the run
	}
	if err := f.validate(); err != nil {
		return err
	}
	if f.traceFile != "" {
		tf, err := os.Create(f.traceFile)
		if err != nil {
			return err
		}
		if err := trace.Start(tf); err != nil {
			return err
		}
		defer func() { trace.Stop(); _ = tf.Close() }()
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); _ = pf.Close() }()
	}

	recv, err := bench.NewReceiver(bench.ReceiverConfig{FailRatio: f.failRatio, Delay: f.delay})
	if err != nil {
		return fmt.Errorf("error starting the receiver: %w", err)
	}
	defer recv.Close()

	res := &benchResult{
		Rate: f.rate, Concurrency: f.concurrency, Fanout: f.fanout, PayloadB: f.payload,
		FailRatio: f.failRatio, DelayMs: float64(f.delay.Microseconds()) / 1000, Mode: "single",
	}
	if f.batch > 0 {
		res.Mode, res.Batch = "batch", f.batch
	}

	base, token := f.target, f.token
	var nd *heraldNode
	if base == "" {
		n, cleanup, err := f.startInProcess(ctx, stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		nd = n
		base, token = n.URL(), n.cfg.APIToken
		res.Target, res.Workers = "in-process sqlite", f.workers
		res.Synchronous = f.sqliteSync
		if f.databaseURL != "" {
			res.Target, res.Synchronous = "in-process postgres", ""
		}
	} else {
		res.Target = f.target
	}
	base = strings.TrimRight(base, "/")

	api := &benchAPI{base: base, token: token, client: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: f.concurrency + 4, IdleConnTimeout: 30 * time.Second},
	}}
	defer api.client.CloseIdleConnections()

	runID := randomHex(4)
	eventType := "bench." + runID
	var subIDs []string
	for range f.fanout {
		id, err := api.createSubscription(ctx, recv.URL()+"/hook", eventType)
		if err != nil {
			return err
		}
		subIDs = append(subIDs, id)
	}
	if f.target != "" {
		defer func() {
			for _, id := range subIDs {
				_ = api.deleteSubscription(context.Background(), id)
			}
		}()
	}

	if f.backlog > 0 {
		failing, err := bench.NewReceiver(bench.ReceiverConfig{FailRatio: 1})
		if err != nil {
			return fmt.Errorf("error starting the failing receiver: %w", err)
		}
		defer failing.Close()
		if err := publishBacklog(ctx, api, failing, "bench."+runID+".backlog", f.backlog, stderr, f.progress); err != nil {
			return err
		}
		res.Backlog = f.backlog
		res.backlogAttempts = failing.Failed
	}

	_, deadBefore, err := api.stats(ctx)
	if err != nil {
		return fmt.Errorf("error reading stats: %w", err)
	}
	p := &publisher{f: &f, api: api, eventType: eventType, pad: bench.Pad(f.payload)}
	var stopProgress func()
	if f.progress {
		stopProgress = progressLine(stderr, p, recv)
	}
	var backlogBefore int64
	if res.backlogAttempts != nil {
		backlogBefore = res.backlogAttempts()
	}
	cpuBefore := api.commitCounts(ctx).cpuSeconds
	start := time.Now()
	var stopSampling func() []benchSample
	if f.sample > 0 {
		stopSampling = sampleRun(f.sample, start, p, recv)
	}
	p.run(ctx, start)
	published := time.Now()
	res.Drain = f.drain
	deliverStart := start
	if f.drain {
		deliverStart = time.Now()
		nd.engine.Start()
	}

	// Wait for the deliveries: until the receiver has them all, or herald
	// reports nothing left to do (the rest died: --fail-ratio exhausted
	// their tiers), or --wait ends.
	deadline := published.Add(f.wait)
	lastCheck := time.Now()
	for ctx.Err() == nil && recv.Delivered() < p.wanted.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if time.Since(lastCheck) > 500*time.Millisecond {
			lastCheck = time.Now()
			if idle, _, err := api.stats(ctx); err == nil && idle && recv.Delivered() < p.wanted.Load() {
				break
			}
		}
	}
	if stopProgress != nil {
		stopProgress()
	}
	if stopSampling != nil {
		res.Samples = stopSampling()
	}

	res.Published, res.PublishErrors = p.accepted.Load(), p.errors.Load()
	res.PublishSeconds = published.Sub(start).Seconds()
	if res.PublishSeconds > 0 {
		res.EventsPerSecond = float64(res.Published) / res.PublishSeconds
	}
	q := p.calls.Quantiles(0.5, 0.99)
	res.PublishCallP50Ms, res.PublishCallP99Ms = q[0], q[1]
	res.DeliveriesWanted, res.Delivered, res.FailedAttempts = p.wanted.Load(), recv.Delivered(), recv.Failed()
	if f.backlog > 0 {
		// The backlog's dead letters are not the measured subscriptions'.
		if dead, err := api.deadCount(ctx, subIDs); err == nil {
			res.Dead = dead
		}
	} else if _, dead, err := api.stats(ctx); err == nil {
		res.Dead = dead - deadBefore
	}
	res.Complete = res.Delivered+res.Dead >= res.DeliveriesWanted
	if last := recv.LastDelivered(); !last.IsZero() {
		res.DeliverSeconds = last.Sub(deliverStart).Seconds()
		res.DeliveriesPerSec = float64(res.Delivered) / res.DeliverSeconds
	}
	if res.backlogAttempts != nil {
		res.BacklogAttempts = res.backlogAttempts() - backlogBefore
	}
	q = recv.Latency().Quantiles(0.5, 0.95, 0.99)
	res.LatencyP50Ms, res.LatencyP95Ms, res.LatencyP99Ms = q[0], q[1], q[2]
	tx := api.commitCounts(ctx)
	res.IngestCommits, res.CompletionTxs, res.IngestCommitMs = tx.ingest, tx.completion, tx.ingestMeanMs
	if res.Delivered > 0 && tx.cpuSeconds > 0 {
		res.CPUPerDeliveryUs = (tx.cpuSeconds - cpuBefore) * 1e6 / float64(res.Delivered)
		res.CPUScope = "process"
		if f.target != "" {
			res.CPUScope = "node"
		}
	}
	res.ClaimTxs, res.DirectDispatched = tx.claims, tx.direct
	if msg, ok := p.firstErr.Load().(string); ok {
		res.FirstPublishError = msg
	}

	// The raw HTTP ceiling, same receiver, same bodies, same concurrency,
	// measured now that herald is idle.
	if f.ceilingMax > 0 && ctx.Err() == nil {
		n := min(max(res.Delivered, 2000), 500_000)
		body := ceilingBody(eventType, p.pad)
		res.Ceiling, err = bench.Ceiling(ctx, recv, body, f.concurrency, n, f.ceilingMax)
		if err != nil {
			return err
		}
		if res.Ceiling.PerSecond > 0 {
			res.CeilingRatio = res.DeliveriesPerSec / res.Ceiling.PerSecond
		}
	}

	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		printBench(stdout, res)
	}
	if res.Published == 0 {
		return fmt.Errorf("nothing was published (first error: %s)", res.FirstPublishError)
	}
	return ctx.Err()
}

func (f *benchFlags) validate() error {
	switch {
	case f.count < 1 || f.count > benchMaxCount:
		return fmt.Errorf("--count must be 1..%d", benchMaxCount)
	case f.duration < 0 || f.duration > benchMaxDuration:
		return fmt.Errorf("--duration must be at most %s", benchMaxDuration)
	case f.concurrency < 1 || f.concurrency > benchMaxConcurrency:
		return fmt.Errorf("--concurrency must be 1..%d", benchMaxConcurrency)
	case f.fanout < 1 || f.fanout > benchMaxFanout:
		return fmt.Errorf("--fanout must be 1..%d", benchMaxFanout)
	case f.payload < 0 || f.payload > benchMaxPayload:
		return fmt.Errorf("--payload must be 0..%d", benchMaxPayload)
	case f.batch < 0 || f.batch > benchMaxBatch:
		return fmt.Errorf("--batch must be 0..%d", benchMaxBatch)
	case f.failRatio < 0 || f.failRatio > 0.9:
		return errors.New("--fail-ratio must be 0..0.9")
	case f.sample != 0 && (f.sample < time.Second || f.sample > benchMaxDuration):
		return fmt.Errorf("--sample must be 0 or 1s..%s", benchMaxDuration)
	case f.backlog < 0 || f.backlog > benchMaxBacklog:
		return fmt.Errorf("--backlog must be 0..%d", benchMaxBacklog)
	case f.rate < 0:
		return errors.New("--rate must not be negative")
	case f.wait < 0 || f.wait > benchMaxDuration:
		return fmt.Errorf("--wait must be at most %s", benchMaxDuration)
	case f.delay < 0 || f.delay > time.Minute:
		return errors.New("--delay must be 0..1m")
	case f.ceilingMax < 0 || f.ceilingMax > time.Minute:
		return errors.New("--ceiling-time must be 0..1m")
	}
	if f.target != "" {
		if f.drain {
			return errors.New("--drain needs an in-process node (no --target)")
		}
		if f.databaseURL != "" {
			return errors.New("--target and --database-url exclude each other")
		}
		if f.token == "" {
			return errors.New("--target needs --token")
		}
		return bench.CheckLoopback(f.target)
	}
	if f.databaseURL != "" {
		u, err := url.Parse(f.databaseURL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return errors.New("--database-url must be a postgres:// URL")
		}
		if h := u.Hostname(); h != "" && h != "localhost" {
			if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("bench uses a loopback database only; %q is not a loopback address", h)
			}
		}
	}
	return nil
}

// startInProcess starts a node like serve would, on a temporary SQLite data
// directory or a fresh PostgreSQL schema, listening on a free loopback port.
func (f *benchFlags) startInProcess(ctx context.Context, stderr io.Writer) (*heraldNode, func(), error) {
	c := &config{}
	fs := flag.NewFlagSet("bench node", flag.ContinueOnError)
	c.flags(fs)
	if err := fs.Parse(nil); err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "herald-bench-")
	if err != nil {
		return nil, nil, err
	}
	c.Listen, c.DataDir, c.Dev = "127.0.0.1:0", dir, true
	c.APIToken = "hrld_bench_" + randomHex(16)
	c.DatabaseURL, c.SQLiteSync = f.databaseURL, f.sqliteSync
	c.Workers, c.Tiers = f.workers, f.tiers
	c.IngestWorkers, c.IngestFlush = f.ingestCommitters, f.ingestFlush
	c.Direct = f.direct
	c.ShutdownWait = 2 * time.Second
	c.holdDelivery = f.drain
	if f.databaseURL != "" {
		c.pgSchema = "herald_bench_" + randomHex(6)
	}
	if err := c.validate(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := startHeraldNode(ctx, c, logger)
	if err != nil {
		_ = os.RemoveAll(dir)
		if c.pgSchema != "" {
			_ = dropSchema(c.DatabaseURL, c.pgSchema)
		}
		return nil, nil, err
	}
	cleanup := func() {
		n.stop()
		if f.keep {
			fmt.Fprintf(stderr, "kept: data dir %s", dir)
			if c.pgSchema != "" {
				fmt.Fprintf(stderr, ", schema %s", c.pgSchema)
			}
			fmt.Fprintln(stderr)
			return
		}
		_ = os.RemoveAll(dir)
		if c.pgSchema != "" {
			if err := dropSchema(c.DatabaseURL, c.pgSchema); err != nil {
				fmt.Fprintf(stderr, "could not drop schema %s: %v\n", c.pgSchema, err)
			}
		}
	}
	return n, cleanup, nil
}

func dropSchema(dbURL, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// publisher publishes events from concurrency goroutines.
type publisher struct {
	f         *benchFlags
	api       *benchAPI
	eventType string
	pad       string

	next     atomic.Int64 // events handed out
	accepted atomic.Int64
	errors   atomic.Int64
	wanted   atomic.Int64 // deliveries herald said it created
	calls    bench.Recorder
	firstErr atomic.Value
}

func (p *publisher) run(ctx context.Context, start time.Time) {
	var end time.Time
	if p.f.duration > 0 {
		end = start.Add(p.f.duration)
	}
	per := int64(max(p.f.batch, 1))
	var wg sync.WaitGroup
	for range p.f.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hi := p.next.Add(per)
				lo := hi - per
				if lo >= p.f.count {
					return
				}
				hi = min(hi, p.f.count)
				stamp := time.Now()
				if p.f.rate > 0 {
					// Fixed schedule: event lo is due at start + lo/rate.
					// Latency counts from the schedule, so a lagging
					// generator does not hide queueing.
					stamp = start.Add(time.Duration(float64(lo) / p.f.rate * float64(time.Second)))
					if d := time.Until(stamp); d > 0 {
						select {
						case <-time.After(d):
						case <-ctx.Done():
							return
						}
					}
				}
				if !end.IsZero() && time.Now().After(end) {
					return
				}
				p.publish(ctx, int(hi-lo), stamp)
			}
		}()
	}
	wg.Wait()
}

func (p *publisher) publish(ctx context.Context, n int, stamp time.Time) {
	t0 := time.Now()
	var (
		accepted, deliveries int64
		err                  error
	)
	if p.f.batch > 0 {
		var buf bytes.Buffer
		buf.WriteString(`{"events":[`)
		for i := range n {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(bench.EventBody(p.eventType, stamp, p.pad))
		}
		buf.WriteString(`]}`)
		accepted, deliveries, err = p.api.publishBatch(ctx, buf.Bytes())
	} else {
		accepted, deliveries, err = p.api.publish(ctx, bench.EventBody(p.eventType, stamp, p.pad))
	}
	p.calls.Add(time.Since(t0))
	if err != nil {
		if ctx.Err() == nil {
			p.errors.Add(int64(n))
			p.firstErr.CompareAndSwap(nil, err.Error())
		}
		return
	}
	p.accepted.Add(accepted)
	p.wanted.Add(deliveries)
}

// publishBacklog subscribes a second endpoint that answers every request
// 500 to its own event type, publishes n events to it through the batch
// API, and returns once they are stored: their deliveries then go through
// the retry tiers while the measured run publishes (head-of-line test).
func publishBacklog(ctx context.Context, api *benchAPI, failing *bench.Receiver, eventType string, n int64, stderr io.Writer, progress bool) error {
	if _, err := api.createSubscription(ctx, failing.URL()+"/hook", eventType); err != nil {
		return err
	}
	body := bench.EventBody(eventType, time.Now(), "")
	var buf bytes.Buffer
	for done := int64(0); done < n; {
		k := min(n-done, benchMaxBatch)
		buf.Reset()
		buf.WriteString(`{"events":[`)
		for i := range k {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(body)
		}
		buf.WriteString(`]}`)
		accepted, _, err := api.publishBatch(ctx, buf.Bytes())
		if err != nil {
			return fmt.Errorf("error publishing the backlog: %w", err)
		}
		if accepted != k {
			return fmt.Errorf("error publishing the backlog: %d of %d events accepted", accepted, k)
		}
		done += k
		if progress {
			fmt.Fprintf(stderr, "\rbacklog %d/%d", done, n)
		}
	}
	if progress {
		fmt.Fprintln(stderr)
	}
	return nil
}

// benchSample is one --sample interval.
type benchSample struct {
	// AtS is the end of the interval, in seconds since publishing began.
	AtS float64 `json:"at_s"`
	// Published and Delivered per second over the interval.
	PublishedPerS float64 `json:"published_per_s"`
	DeliveredPerS float64 `json:"delivered_per_s"`
	// Backlog is deliveries accepted but not yet received.
	Backlog int64 `json:"backlog"`
	// LatencyP99Ms is the publish→delivery p99 of the interval's deliveries.
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	// HeapMB is the Go heap in use and RSSMB the process's resident set
	// (publisher, node and receiver share the process).
	HeapMB float64 `json:"heap_mb"`
	RSSMB  float64 `json:"rss_mb"`
}

// sampleRun records a benchSample every interval until the returned stop.
func sampleRun(every time.Duration, start time.Time, p *publisher, recv *bench.Receiver) (stop func() []benchSample) {
	done := make(chan struct{})
	var out []benchSample
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(every)
		defer tk.Stop()
		lastPub, lastDel, last := int64(0), int64(0), start
		mark := recv.Latency().Mark()
		for {
			select {
			case <-done:
				return
			case now := <-tk.C:
				pub, del := p.accepted.Load(), recv.Delivered()
				dt := now.Sub(last).Seconds()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				p99 := recv.Latency().QuantilesSince(mark, 0.99)[0]
				mark = recv.Latency().Mark()
				out = append(out, benchSample{
					AtS:           now.Sub(start).Seconds(),
					PublishedPerS: float64(pub-lastPub) / dt,
					DeliveredPerS: float64(del-lastDel) / dt,
					Backlog:       p.wanted.Load() - del,
					LatencyP99Ms:  p99,
					HeapMB:        float64(ms.HeapInuse) / (1 << 20),
					RSSMB:         rssMB(),
				})
				lastPub, lastDel, last = pub, del, now
			}
		}
	}()
	return func() []benchSample { close(done); <-finished; return out }
}

// rssMB reads this process's resident set from /proc (0 where there is no
// /proc).
func rssMB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

func progressLine(w io.Writer, p *publisher, recv *bench.Receiver) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		lastPub, lastDel, last := int64(0), int64(0), time.Now()
		for {
			select {
			case <-done:
				fmt.Fprintln(w)
				return
			case now := <-tk.C:
				pub, del := p.accepted.Load(), recv.Delivered()
				dt := now.Sub(last).Seconds()
				fmt.Fprintf(w, "\r\033[Kpublished %d (%.0f/s)  delivered %d (%.0f/s)  backlog %d  errors %d",
					pub, float64(pub-lastPub)/dt, del, float64(del-lastDel)/dt, p.wanted.Load()-del, p.errors.Load())
				lastPub, lastDel, last = pub, del, now
			}
		}
	}()
	return func() { close(done); <-finished }
}

func printBench(w io.Writer, r *benchResult) {
	fmt.Fprintf(w, "target              %s", r.Target)
	if r.Synchronous != "" {
		fmt.Fprintf(w, " (synchronous=%s)", r.Synchronous)
	}
	fmt.Fprintln(w)
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
	fmt.Fprintf(w, "publish→delivery    p50 %.2f ms, p95 %.2f ms, p99 %.2f ms\n", r.LatencyP50Ms, r.LatencyP95Ms, r.LatencyP99Ms)
	if r.Ceiling.Requests > 0 {
		fmt.Fprintf(w, "raw HTTP ceiling    %.0f requests/s (%d requests, p50 %.2f ms, p99 %.2f ms)\n",
			r.Ceiling.PerSecond, r.Ceiling.Requests, r.Ceiling.P50Ms, r.Ceiling.P99Ms)
		fmt.Fprintf(w, "deliveries/ceiling  %.1f%%\n", 100*r.CeilingRatio)
	}
	if r.CPUPerDeliveryUs > 0 {
		scope := "herald process (in-process: publishers and receiver included)"
		if r.CPUScope == "node" {
			scope = "target node only"
		}
		fmt.Fprintf(w, "CPU per delivery    %.0f µs (%s)\n", r.CPUPerDeliveryUs, scope)
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
		fmt.Fprintln(w, "samples             at_s  published/s  delivered/s  backlog  p99_ms  heap_mb  rss_mb")
		for _, sm := range r.Samples {
			fmt.Fprintf(w, "                    %5.0f  %11.0f  %11.0f  %7d  %6.1f  %7.1f  %6.1f\n",
				sm.AtS, sm.PublishedPerS, sm.DeliveredPerS, sm.Backlog, sm.LatencyP99Ms, sm.HeapMB, sm.RSSMB)
		}
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

// ceilingBody is a body the size of herald's deliveries of the same events.
func ceilingBody(eventType, pad string) []byte {
	ev := bench.EventBody(eventType, time.Now(), pad)
	var b bytes.Buffer
	b.WriteString(`{"id":"evt_01kb2t3x4y5z6a7b8c9d0e1f2g","type":"` + eventType + `","timestamp":"2026-11-22T07:30:00.000Z","data":`)
	// EventBody is {"type":…,"data":{…}}; take the data object.
	i := bytes.Index(ev, []byte(`"data":`))
	b.Write(ev[i+len(`"data":`) : len(ev)-1])
	b.WriteByte('}')
	return b.Bytes()
}

// benchAPI is the part of herald's HTTP API bench uses.
type benchAPI struct {
	base, token string
	client      *http.Client
}

func (a *benchAPI) do(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw[:min(len(raw), 300)]))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func (a *benchAPI) createSubscription(ctx context.Context, hookURL, eventType string) (string, error) {
	body, _ := json.Marshal(map[string]any{"url": hookURL, "event_types": []string{eventType}, "description": "herald bench"})
	var out struct {
		ID string `json:"id"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/subscriptions", body, &out); err != nil {
		return "", fmt.Errorf("error creating the bench subscription: %w", err)
	}
	return out.ID, nil
}

func (a *benchAPI) deleteSubscription(ctx context.Context, id string) error {
	return a.do(ctx, http.MethodDelete, "/v1/subscriptions/"+id, nil, nil)
}

func (a *benchAPI) publish(ctx context.Context, body []byte) (accepted, deliveries int64, err error) {
	var out struct {
		Duplicate  bool  `json:"duplicate"`
		Deliveries int64 `json:"deliveries"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/events", body, &out); err != nil {
		return 0, 0, err
	}
	return 1, out.Deliveries, nil
}

func (a *benchAPI) publishBatch(ctx context.Context, body []byte) (accepted, deliveries int64, err error) {
	var out struct {
		Results []struct {
			Status     string `json:"status"`
			Deliveries int64  `json:"deliveries"`
		} `json:"results"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/events/batch", body, &out); err != nil {
		return 0, 0, err
	}
	for _, r := range out.Results {
		if r.Status == "accepted" {
			accepted++
			deliveries += r.Deliveries
		}
	}
	return accepted, deliveries, nil
}

// commitCounts reads the ingest commit and completion transaction counts
// from /metrics (zeros when the node does not export them).
// txCounts are the node's transaction counters from /metrics.
type txCounts struct {
	ingest, completion, claims, direct int64
	ingestMeanMs                       float64
	// cpuSeconds is process_cpu_seconds_total: the node's user+system CPU.
	cpuSeconds float64
}

func (a *benchAPI) commitCounts(ctx context.Context) (c txCounts) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/metrics", nil)
	if err != nil {
		return c
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return c
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err != nil {
			continue
		}
		switch name {
		case "herald_ingest_commit_batch_size_count":
			c.ingest = int64(v)
		case "herald_completion_batch_size_count":
			c.completion = int64(v)
		case "herald_claim_batch_size_count":
			c.claims = int64(v)
		case "herald_direct_dispatch_total":
			c.direct = int64(v)
		case "herald_ingest_commit_duration_seconds_sum":
			c.ingestMeanMs = v * 1000
		case "process_cpu_seconds_total":
			c.cpuSeconds = v
		}
	}
	if c.ingest > 0 {
		c.ingestMeanMs /= float64(c.ingest)
	}
	return c
}

// stats reports whether herald has no pending or in-flight delivery left,
// and how many dead letters it holds.
func (a *benchAPI) stats(ctx context.Context) (idle bool, dead int64, err error) {
	var st struct {
		Tiers []struct {
			Pending  int64 `json:"pending"`
			InFlight int64 `json:"in_flight"`
		} `json:"tiers"`
		Dead int64 `json:"dead"`
	}
	if err := a.do(ctx, http.MethodGet, "/v1/stats", nil, &st); err != nil {
		return false, 0, err
	}
	idle = true
	for _, t := range st.Tiers {
		if t.Pending+t.InFlight > 0 {
			idle = false
		}
	}
	return idle, st.Dead, nil
}

// deadCount counts the dead letters of the given subscriptions.
func (a *benchAPI) deadCount(ctx context.Context, subIDs []string) (int64, error) {
	var n int64
	for _, id := range subIDs {
		cursor := ""
		for {
			var page struct {
				Data       []json.RawMessage `json:"data"`
				NextCursor *string           `json:"next_cursor"`
			}
			path := "/v1/deliveries?state=dead&limit=1000&subscription_id=" + url.QueryEscape(id)
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			if err := a.do(ctx, http.MethodGet, path, nil, &page); err != nil {
				return 0, err
			}
			n += int64(len(page.Data))
			if page.NextCursor == nil || *page.NextCursor == "" {
				break
			}
			cursor = *page.NextCursor
		}
	}
	return n, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
