package main

import (
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
	"net/url"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/bench"
	"github.com/heraldhq/herald/internal/gctune"
)

// `herald bench` is the CLI of package bench: flags and their bounds, the
// in-process node when there is no --target, profiling, and printing. The
// load, the sampler and the report are bench's.

// Bench limits: a run is bounded in size and time.
const (
	benchMaxCount       = 10_000_000
	benchMaxDuration    = time.Hour
	benchMaxConcurrency = 1024
	benchMaxFanout      = 100
	benchMaxPayload     = 256 << 10
	benchMaxBacklog     = 1_000_000
)

type benchFlags struct {
	target, token           string
	databaseURL             string
	sqliteSync              string
	workers                 int
	tiers                   string
	ingestCommitters        int
	ingestMaxBatch          int
	gcHeapFloor             int64
	ingestFlush             time.Duration
	ingestBatchYield        time.Duration
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
	destination, brokerURL  string
	rawConcurrency          int
	source                  string
	prefetch                int
	latencyCount            int64
	phases                  int
	burst                   int64
	burstEvery              time.Duration
	idle                    time.Duration
	phaseCounts             string
	steady                  bool
	floor                   bool
	steadyCounts            string
	observeDB               string
}

func cmdBench(ctx context.Context, args []string) error {
	return runBench(ctx, args, os.Stdout, os.Stderr)
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "push" {
		return runBenchPush(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "push-client" {
		return runBenchPushClient(ctx, stdout)
	}
	if len(args) > 0 && args[0] == "relay" {
		return runBenchRelay(ctx, args[1:], os.Stdin, stdout, stderr)
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
	fs.IntVar(&f.ingestMaxBatch, "ingest-max-batch", 0, "in-process node: most events in one group commit (default as serve)")
	fs.DurationVar(&f.ingestBatchYield, "ingest-batch-yield", 0, "in-process node: serve's --ingest-batch-yield (default as serve; negative: batches never yield)")
	fs.BoolVar(&f.direct, "direct-dispatch", true, "in-process node: send fresh deliveries without a claim when workers are free")
	fs.Int64Var(&f.gcHeapFloor, "gc-heap-floor", gctune.DefaultFloor, "in-process node: serve's --gc-heap-floor, for the whole bench process (publishers and receiver too); 0: Go's default pacing")
	fs.Float64Var(&f.rate, "rate", 0, "events per second to publish (0: as fast as possible)")
	fs.Int64Var(&f.count, "count", 10000, "events to publish (with --duration: at most this many; default then 10,000,000)")
	fs.DurationVar(&f.duration, "duration", 0, "publish for this long instead of a fixed count (at most 1h)")
	fs.IntVar(&f.payload, "payload", 1024, "bytes of event data")
	fs.IntVar(&f.concurrency, "concurrency", 64, "concurrent publish calls (and connections of the raw HTTP ceiling run)")
	fs.IntVar(&f.batch, "batch", 0, "publish through the batch API, N events per call (0: single publishes)")
	fs.IntVar(&f.fanout, "fanout", 1, "subscriptions matching every event (deliveries per event)")
	fs.Float64Var(&f.failRatio, "fail-ratio", 0, "share of deliveries the receiver answers 500 (0..0.9)")
	fs.Int64Var(&f.backlog, "backlog", 0, "head-of-line test: first publish this many events to a second subscription whose endpoint always answers 500, so they go through the retry tiers during the run (the measured subscription is unaffected; 0..1,000,000)")
	fs.DurationVar(&f.delay, "delay", 0, "receiver response delay")
	fs.DurationVar(&f.wait, "wait", time.Minute, "how long to wait for deliveries after publishing ends")
	fs.DurationVar(&f.ceilingMax, "ceiling-time", 5*time.Second, "longest raw ceiling run: plain HTTP POSTs for webhooks, the broker client's own publish-with-ack for --destination (0 skips it)")
	fs.StringVar(&f.destination, "destination", "webhook", "destination type of the bench subscriptions: "+strings.Join(bench.DestinationTypes, ", ")+"; a broker type first measures the broker client's own publish rate (--ceiling-time), then herald delivering to a consumer on the same broker")
	fs.StringVar(&f.brokerURL, "broker-url", "", "the broker of --destination amqp|nats|redis|mqtt (loopback only; default the machine's: "+
		"amqp://guest:guest@127.0.0.1:5672/, nats://127.0.0.1:4222, redis://127.0.0.1:6379/0, mqtt://127.0.0.1:1883)")
	fs.IntVar(&f.rawConcurrency, "raw-concurrency", 0, "--destination: workers of the raw phase (default --concurrency; with --batch and few publishers, set it to --workers: herald delivers from its workers)")
	fs.StringVar(&f.source, "source", "", "measure a broker source instead ("+strings.Join(bench.SourceTypes, ", ")+"): --count messages preloaded and consumed by the broker client alone (ack only), then by herald (events stored/s), then --latency-count messages at --rate (default 1000/s) broker publish → webhook")
	fs.IntVar(&f.prefetch, "prefetch", 0, "--source: prefetch of the raw consumer and the source (0: herald's default, 256)")
	fs.Int64Var(&f.latencyCount, "latency-count", 10000, "--source: messages of the latency phase (0 skips it)")
	fs.IntVar(&f.phases, "phases", 0, "the after-load check, N runs (1..100): each run drives one node through 30,000 single publishes (64 publishers), 50,000 through the batch API (100 a call, 8 publishers) and 10,000 at 1,000/s, and prints each phase's figures and the spread over the runs; each run starts a fresh in-process node, or uses --target throughout")
	fs.Int64Var(&f.burst, "burst", 0, "side load: every --burst-every, publish this many events (batch API, 100 a call, 8 publishers) to a subscription of their own while the measured load runs (0..1,000,000; the soak of issue 28: --duration 30m --rate 1000 --sample 30s --burst 20000 --burst-every 5m)")
	fs.DurationVar(&f.burstEvery, "burst-every", 5*time.Minute, "--burst: the interval between bursts (1s..1h)")
	fs.DurationVar(&f.idle, "idle", 0, "measure a node with no traffic for this long (1s..1h) instead: its CPU and, on PostgreSQL, the database's, as a share of one core")
	fs.BoolVar(&f.steady, "steady", false, "the steady-rate check of issue 26 on one node (--target, or a fresh in-process one): single publishes at 200/s, then at 1,000/s, then as fast as possible (64 publishers), printing the CPU per delivery of each (the node's with --target; PostgreSQL's with --observe-database or an in-process PostgreSQL node) and its ratio to the saturated phase")
	fs.BoolVar(&f.floor, "floor", false, "--steady: then send the same phases through a bare relay on the same kind of store in a process of its own (HTTP in, one insert, 202, HTTP out; PostgreSQL with --observe-database, else SQLite) and print its CPU per delivery beside herald's: what this machine charges any such service per delivery at each rate")
	fs.StringVar(&f.steadyCounts, "steady-counts", countsFlag(bench.DefaultSteadyCounts), "--steady: events of the 200/s, 1,000/s and saturated phases (each 1..1000000)")
	fs.StringVar(&f.phaseCounts, "phase-counts", countsFlag(bench.DefaultPhaseCounts), "--phases: events of the single, batch and rate phases (0 skips a phase)")
	fs.StringVar(&f.observeDB, "observe-database", "", "a --target node's PostgreSQL URL (loopback): reports the CPU of this machine's PostgreSQL processes per delivery, and with --phases the checkpoints, autovacuum runs and wait events of each phase (an in-process PostgreSQL node is observed anyway)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object instead of the report")
	fs.BoolVar(&f.progress, "progress", isTerminal(os.Stderr), "progress line on stderr every 500ms (default when stderr is a terminal)")
	fs.BoolVar(&f.drain, "drain", false, "in-process only: hold delivery until everything is published, then measure delivery alone (burn-down; latency then includes the hold)")
	fs.BoolVar(&f.keep, "keep", false, "keep the in-process node's data directory or PostgreSQL schema")
	fs.DurationVar(&f.sample, "sample", 0, "record throughput, latency and memory every interval (long-run stability; 0: off; at least 1s)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (publisher, node and receiver) to this file")
	fs.StringVar(&f.traceFile, "trace", "", "write a Go execution trace of the whole run to this file (go tool trace; for latency: where goroutines waited)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
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

	if f.source != "" {
		return runBenchSource(ctx, &f, stdout, stderr)
	}
	if f.phases > 0 {
		return runBenchPhases(ctx, &f, stdout, stderr)
	}
	if f.steady {
		return runBenchSteady(ctx, &f, stdout, stderr)
	}
	if f.idle > 0 {
		return runBenchIdle(ctx, &f, stdout, stderr)
	}
	cfg := bench.Config{
		Rate: f.rate, Count: f.count, Duration: f.duration, Payload: f.payload, Concurrency: f.concurrency,
		Batch: f.batch, Fanout: f.fanout, FailRatio: f.failRatio, Delay: f.delay, Backlog: f.backlog,
		Wait: f.wait, CeilingMax: f.ceilingMax, Sample: f.sample, Drain: f.drain,
		Destination: f.destination, BrokerURL: f.brokerURL, RawConcurrency: f.rawConcurrency,
		PostgresCPU: f.measuresPostgres(),
		Burst:       f.burst, BurstEvery: f.burstEvery,
	}
	if f.progress {
		cfg.Progress = stderr
	}
	start := func(ctx context.Context) (bench.Node, func(), error) {
		if f.target != "" {
			return bench.Node{URL: f.target, Token: f.token, Remote: true}, func() {}, nil
		}
		n, cleanup, err := f.startInProcess(ctx, stderr)
		if err != nil {
			return bench.Node{}, nil, err
		}
		return bench.Node{URL: n.URL(), Token: n.cfg.APIToken, StartDelivery: n.engine.Start}, cleanup, nil
	}
	res, err := bench.Run(ctx, cfg, start)
	if err != nil {
		return err
	}
	res.Target = f.target
	if f.target == "" {
		res.Target, res.Workers = "in-process sqlite", f.workers
		res.Synchronous = f.sqliteSync
		if f.databaseURL != "" {
			res.Target, res.Synchronous = "in-process postgres", ""
		}
	}

	if err := writeBenchResult(stdout, f.jsonOut, res, func(w io.Writer) { bench.WriteReport(w, res) }); err != nil {
		return err
	}
	if res.Published == 0 {
		return fmt.Errorf("nothing was published (first error: %s)", res.FirstPublishError)
	}
	return ctx.Err()
}

// writeBenchResult prints res as indented JSON with --json (jsonOut), and
// otherwise as report writes it: the ending every bench mode shares.
func writeBenchResult(stdout io.Writer, jsonOut bool, res any, report func(io.Writer)) error {
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	report(stdout)
	return nil
}

func (f *benchFlags) validate() error {
	if f.source != "" {
		return nil // runBenchSource checks its own flags
	}
	if f.burst < 0 || f.burst > 1_000_000 {
		return errors.New("--burst must be 0..1000000")
	}
	if f.burst > 0 && (f.burstEvery < time.Second || f.burstEvery > time.Hour) {
		return errors.New("--burst-every must be 1s..1h")
	}
	if f.burst > 0 && f.destination != "webhook" {
		return errors.New("--burst applies to --destination webhook only")
	}
	if f.idle != 0 && (f.idle < time.Second || f.idle > benchMaxDuration) {
		return fmt.Errorf("--idle must be 1s..%s", benchMaxDuration)
	}
	if f.phases < 0 || f.phases > 100 {
		return errors.New("--phases must be 0..100")
	}
	if f.steady && (f.phases > 0 || f.idle > 0) {
		return errors.New("--steady runs alone: not with --phases or --idle")
	}
	if f.floor && (!f.steady || f.target == "") {
		return errors.New("--floor is for --steady with --target (the relay's CPU compares with a node's alone)")
	}
	if f.observeDB != "" {
		if f.target == "" {
			return errors.New("--observe-database is for a --target node (an in-process PostgreSQL node is observed anyway)")
		}
		if err := checkLoopbackDB(f.observeDB, "--observe-database"); err != nil {
			return err
		}
	}
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
	case f.batch < 0 || f.batch > bench.MaxBatch:
		return fmt.Errorf("--batch must be 0..%d", bench.MaxBatch)
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
	case f.rawConcurrency < 0 || f.rawConcurrency > benchMaxConcurrency:
		return fmt.Errorf("--raw-concurrency must be 0..%d", benchMaxConcurrency)
	case !slices.Contains(bench.DestinationTypes, f.destination):
		return fmt.Errorf("--destination must be one of %s", strings.Join(bench.DestinationTypes, ", "))
	}
	// The receiver's knobs and the always-failing backlog endpoint are a
	// webhook's; a broker or the bench's push service answers as it does.
	if f.destination != "webhook" && (f.failRatio > 0 || f.delay > 0 || f.backlog > 0) {
		return errors.New("--fail-ratio, --delay and --backlog apply to --destination webhook only")
	}
	if f.brokerURL != "" {
		if bench.DefaultBrokerURL(f.destination) == "" {
			return fmt.Errorf("--broker-url is for a broker destination (amqp, nats, redis, mqtt), not %s", f.destination)
		}
		if err := bench.CheckBrokerURL(f.destination, f.brokerURL); err != nil {
			return err
		}
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
		return checkLoopbackDB(f.databaseURL, "--database-url")
	}
	return nil
}

// checkLoopbackDB refuses a database URL that is not PostgreSQL on a
// loopback address: bench loads what it touches.
func checkLoopbackDB(raw, flagName string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("%s must be a postgres:// URL", flagName)
	}
	if h := u.Hostname(); h != "" && h != "localhost" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("bench uses a loopback database only; %q is not a loopback address", h)
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
	if f.ingestMaxBatch > 0 {
		c.IngestBatch = f.ingestMaxBatch
	}
	if f.ingestBatchYield != 0 {
		c.IngestBatchYield = f.ingestBatchYield
	}
	c.Direct = f.direct
	c.GCHeapFloor = f.gcHeapFloor
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
	stopGC := tuneGC(c, logger)
	n, err := startHeraldNode(ctx, c, logger)
	if err != nil {
		stopGC()
		_ = os.RemoveAll(dir)
		if c.pgSchema != "" {
			_ = dropSchema(c.DatabaseURL, c.pgSchema)
		}
		return nil, nil, err
	}
	cleanup := func() {
		n.stop()
		stopGC()
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
