package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/client"
)

// MaxBatch is the batch API's limit on events per call.
const MaxBatch = 1000

// Config is one run of the event load generator. cmd/herald fills it from
// `herald bench`'s flags and checks their bounds.
type Config struct {
	// Rate is events per second (0: as fast as possible).
	Rate float64
	// Count is how many events to publish; with Duration, at most this many.
	Count    int64
	Duration time.Duration
	// Payload is the bytes of event data.
	Payload int
	// Concurrency is the concurrent publish calls (and the connections of
	// the ceiling run).
	Concurrency int
	// Batch, when > 0, publishes through the batch API, Batch events a call.
	Batch int
	// Fanout is the subscriptions matching every event.
	Fanout int
	// FailRatio and Delay configure the receiver (ReceiverConfig).
	FailRatio float64
	Delay     time.Duration
	// Backlog, when > 0, first publishes this many events to a second
	// subscription whose endpoint always fails (head-of-line test).
	Backlog int64
	// Wait is how long to wait for deliveries after publishing ends.
	Wait time.Duration
	// CeilingMax bounds the raw HTTP ceiling run (0 skips it).
	CeilingMax time.Duration
	// Sample, when > 0, records a Sample every interval.
	Sample time.Duration
	// Drain measures delivery alone: the node holds delivery until
	// Node.StartDelivery, called once everything is published.
	Drain bool
	// Progress, when not nil, gets a progress line every 500 ms.
	Progress io.Writer
	// Destination is the subscriptions' destination type ("" or
	// "webhook": the local receiver); BrokerURL the broker of a broker
	// type (DefaultBrokerURL when ""). With a destination other than
	// webhook, CeilingMax bounds the raw phase (destination.go) instead
	// of the HTTP ceiling run.
	Destination, BrokerURL string
	// RawConcurrency is the raw phase's workers (0: Concurrency). herald
	// delivers from its own workers whatever the publish concurrency, so a
	// --batch run with few publishers compares fairly only with as many
	// raw workers as the node has.
	RawConcurrency int
	// Burst, when > 0, publishes Burst events every BurstEvery to a
	// subscription of their own while the load runs (burst.go).
	Burst      int64
	BurstEvery time.Duration
	// PostgresCPU measures the CPU of this machine's PostgreSQL server
	// processes per delivery (Result.DBCPUPerDeliveryUs): set it when the
	// node runs on a local PostgreSQL.
	PostgresCPU bool
}

// Node is the herald under load.
type Node struct {
	// URL and Token reach its API.
	URL, Token string
	// Remote is a node bench did not start (--target): its subscriptions
	// are deleted afterwards, and its CPU figure is the node's alone.
	Remote bool
	// StartDelivery releases the delivery an in-process node holds (Drain).
	StartDelivery func()
}

// Run runs the load and returns its result. It starts the receiver, then
// calls start for the node (so a node comes up with its endpoint already
// listening), and stops the node before the receiver: deliveries still in
// flight at the end get their answers.
func Run(ctx context.Context, cfg Config, start func(context.Context) (Node, func(), error)) (*Result, error) {
	recv, err := NewReceiver(ReceiverConfig{FailRatio: cfg.FailRatio, Delay: cfg.Delay})
	if err != nil {
		return nil, fmt.Errorf("error starting the receiver: %w", err)
	}
	defer recv.Close()

	res := &Result{
		Rate: cfg.Rate, Concurrency: cfg.Concurrency, Fanout: cfg.Fanout, PayloadB: cfg.Payload,
		FailRatio: cfg.FailRatio, DelayMs: float64(cfg.Delay.Microseconds()) / 1000, Mode: "single",
		Destination: "webhook",
	}
	if cfg.Batch > 0 {
		res.Mode, res.Batch = "batch", cfg.Batch
	}
	runID := randomHex(4)
	eventType := "bench." + runID
	pad := Pad(cfg.Payload)

	// A broker destination: connect, and measure the broker client alone
	// first, before the node starts, so the process's CPU is the client's.
	var dest *destRun
	if cfg.Destination != "" && cfg.Destination != "webhook" {
		if cfg.BrokerURL == "" {
			cfg.BrokerURL = DefaultBrokerURL(cfg.Destination)
		}
		b, err := newBroker(ctx, cfg.Destination, cfg.BrokerURL, runID, cfg.Concurrency)
		if err != nil {
			return nil, err
		}
		defer b.close()
		dest = &destRun{typ: cfg.Destination, b: b, arr: newArrivals()}
		res.Destination = cfg.Destination
		res.Broker = &DestinationResult{Type: cfg.Destination, BrokerURL: redact(cfg.BrokerURL)}
		if ps, ok := b.(*pushService); ok {
			res.Broker.BrokerURL = ps.url()
		}
		if cfg.CeilingMax > 0 {
			n := min(max(cfg.Count*int64(cfg.Fanout), 2000), 500_000)
			workers := cfg.RawConcurrency
			if workers <= 0 {
				workers = cfg.Concurrency
			}
			res.Broker.Raw = runRaw(ctx, b, ceilingBody(eventType, pad), workers, n, cfg.CeilingMax)
			res.Broker.Raw.Concurrency = workers
			if res.Broker.Raw.Messages == 0 {
				return nil, fmt.Errorf("raw %s publish: nothing acknowledged: %s", cfg.Destination, res.Broker.Raw.Error)
			}
		}
	}

	node, stop, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()

	api := client.New(node.URL, node.Token)
	api.HTTP = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency + 4, IdleConnTimeout: 30 * time.Second},
	}
	defer api.HTTP.CloseIdleConnections()

	var out sink = recv
	var destBody client.Destination
	if dest != nil {
		if destBody, err = dest.setup(ctx, api, runID); err != nil {
			return nil, err
		}
		out = dest.arr
		if node.Remote && dest.connName != "" {
			// Deferred before the subscriptions' deletion, so it runs
			// after it: a connection in use cannot be deleted.
			defer func() { _ = api.DeleteConnection(context.Background(), dest.connName) }()
		}
	}
	var subIDs []string
	for range cfg.Fanout {
		var id string
		if dest != nil {
			id, err = createDestSubscription(ctx, api, destBody, eventType)
		} else {
			id, err = createSubscription(ctx, api, recv.URL()+"/hook", eventType)
		}
		if err != nil {
			return nil, err
		}
		subIDs = append(subIDs, id)
	}
	if node.Remote {
		defer func() {
			for _, id := range subIDs {
				_ = api.DeleteSubscription(context.Background(), id)
			}
		}()
	}

	var backlogAttempts func() int64
	if cfg.Backlog > 0 {
		failing, err := NewReceiver(ReceiverConfig{FailRatio: 1})
		if err != nil {
			return nil, fmt.Errorf("error starting the failing receiver: %w", err)
		}
		defer failing.Close()
		if err := publishBacklog(ctx, api, failing, "bench."+runID+".backlog", cfg.Backlog, cfg.Progress); err != nil {
			return nil, err
		}
		res.Backlog = cfg.Backlog
		backlogAttempts = failing.Failed
	}

	_, deadBefore, err := queueState(ctx, api)
	if err != nil {
		return nil, fmt.Errorf("error reading stats: %w", err)
	}
	var bursts *burster
	if cfg.Burst > 0 && cfg.BurstEvery > 0 {
		if bursts, err = startBursts(ctx, api, eventType+".burst", cfg.Burst, cfg.BurstEvery); err != nil {
			return nil, err
		}
		defer bursts.close()
	}
	p := &publisher{cfg: &cfg, api: api, eventType: eventType, pad: pad}
	var stopProgress func()
	if cfg.Progress != nil {
		stopProgress = progressLine(cfg.Progress, p, out)
	}
	var backlogBefore int64
	if backlogAttempts != nil {
		backlogBefore = backlogAttempts()
	}
	cpuBefore, machineBefore := nodeCounters(ctx, api).cpuSeconds, readMachineTicks()
	procBefore := processCPU()
	var dbBefore float64
	if cfg.PostgresCPU {
		dbBefore = postgresCPU()
	}
	began := time.Now()
	var stopSampling func() []Sample
	if cfg.Sample > 0 {
		stopSampling = sampleRun(cfg.Sample, began, p, out)
	}
	p.run(ctx, began)
	if bursts != nil {
		bursts.stopBursts()
	}
	published := time.Now()
	res.Drain = cfg.Drain
	deliverStart := began
	if cfg.Drain {
		deliverStart = time.Now()
		node.StartDelivery()
	}

	// Wait for the deliveries: until the receiver has them all, or herald
	// reports nothing left to do (the rest died: --fail-ratio exhausted
	// their tiers), or --wait ends.
	deadline := published.Add(cfg.Wait)
	lastCheck := time.Now()
	for ctx.Err() == nil && (out.Delivered() < p.wanted.Load() || (bursts != nil && !bursts.settled())) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if time.Since(lastCheck) > 500*time.Millisecond {
			lastCheck = time.Now()
			if idle, _, err := queueState(ctx, api); err == nil && idle && out.Delivered() < p.wanted.Load() {
				break
			}
		}
	}
	procCPU := processCPU() - procBefore
	var dbCPU float64
	if cfg.PostgresCPU {
		dbCPU = postgresCPU() - dbBefore
	}
	if dest != nil && dest.arr.open != nil {
		dest.arr.finish() // webpush: decrypt now, outside the measured CPU
	}
	if stopProgress != nil {
		stopProgress()
	}
	if stopSampling != nil {
		res.Samples = stopSampling()
	}

	res.Published, res.PublishErrors = p.accepted.Load(), p.errors.Load()
	res.PublishSeconds = published.Sub(began).Seconds()
	if res.PublishSeconds > 0 {
		res.EventsPerSecond = float64(res.Published) / res.PublishSeconds
	}
	q := p.calls.Quantiles(0.5, 0.99)
	res.PublishCallP50Ms, res.PublishCallP99Ms = q[0], q[1]
	res.DeliveriesWanted, res.Delivered, res.FailedAttempts = p.wanted.Load(), out.Delivered(), out.Failed()
	if cfg.Backlog > 0 {
		// The backlog's dead letters are not the measured subscriptions'.
		if dead, err := deadCount(ctx, api, subIDs); err == nil {
			res.Dead = dead
		}
	} else if _, dead, err := queueState(ctx, api); err == nil {
		res.Dead = dead - deadBefore
	}
	res.Complete = res.Delivered+res.Dead >= res.DeliveriesWanted
	if last := out.LastDelivered(); !last.IsZero() {
		res.DeliverSeconds = last.Sub(deliverStart).Seconds()
		res.DeliveriesPerSec = float64(res.Delivered) / res.DeliverSeconds
	}
	if backlogAttempts != nil {
		res.BacklogAttempts = backlogAttempts() - backlogBefore
	}
	q = out.Latency().Quantiles(0.5, 0.95, 0.99)
	res.LatencyP50Ms, res.LatencyP95Ms, res.LatencyP99Ms = q[0], q[1], q[2]
	tx := nodeCounters(ctx, api)
	res.IngestCommits, res.CompletionTxs, res.IngestCommitMs = tx.ingest, tx.completion, tx.ingestMeanMs
	if res.Delivered > 0 && tx.cpuSeconds > 0 {
		res.CPUPerDeliveryUs = (tx.cpuSeconds - cpuBefore) * 1e6 / float64(res.Delivered)
		res.CPUScope = "process"
		if node.Remote {
			res.CPUScope = "node"
		}
	}
	res.ClaimTxs, res.DirectDispatched = tx.claims, tx.direct
	res.Machine = usageSince(machineBefore, readMachineTicks())
	if bursts != nil {
		res.Bursts = &BurstResult{
			Size: cfg.Burst, EverySeconds: cfg.BurstEvery.Seconds(), Bursts: bursts.bursts.Load(),
			Published: bursts.published.Load(), PublishErrors: bursts.errors.Load(),
			DeliveriesExpected: bursts.wanted.Load(), Delivered: bursts.recv.Delivered(),
		}
	}
	summarizeWindows(res)
	if res.Delivered > 0 && dbCPU > 0 {
		res.DBCPUPerDeliveryUs = dbCPU * 1e6 / float64(res.Delivered)
	}
	if msg, ok := p.firstErr.Load().(string); ok {
		res.FirstPublishError = msg
	}

	if dest != nil {
		d := res.Broker
		d.HeraldPerSecond = res.DeliveriesPerSec
		if d.Raw.PerSecond > 0 {
			d.Ratio = d.HeraldPerSecond / d.Raw.PerSecond
		}
		d.PublishToBrokerP50Ms, d.PublishToBrokerP99Ms = res.LatencyP50Ms, res.LatencyP99Ms
		if res.Delivered > 0 {
			d.CPUPerDeliveryUs = procCPU * 1e6 / float64(res.Delivered)
			if !node.Remote && d.Raw.Messages > 0 {
				d.ExtraCPUPerDeliveryUs = d.CPUPerDeliveryUs - d.Raw.CPUPerMessageUs
			}
		}
		d.Duplicates, d.Invalid = dest.arr.duplicates.Load(), dest.arr.invalid.Load()
		return res, nil
	}

	// The raw HTTP ceiling, same receiver, same bodies, same concurrency,
	// measured now that herald is idle.
	if cfg.CeilingMax > 0 && ctx.Err() == nil {
		n := min(max(res.Delivered, 2000), 500_000)
		body := ceilingBody(eventType, pad)
		res.Ceiling, err = Ceiling(ctx, recv, body, cfg.Concurrency, n, cfg.CeilingMax)
		if err != nil {
			return nil, err
		}
		if res.Ceiling.PerSecond > 0 {
			res.CeilingRatio = res.DeliveriesPerSec / res.Ceiling.PerSecond
		}
	}
	return res, nil
}

// publisher publishes events from concurrency goroutines.
type publisher struct {
	cfg       *Config
	api       *client.Client
	eventType string
	pad       string

	next     atomic.Int64 // events handed out
	accepted atomic.Int64
	errors   atomic.Int64
	wanted   atomic.Int64 // deliveries herald said it created
	calls    Recorder
	firstErr atomic.Value
}

func (p *publisher) run(ctx context.Context, start time.Time) {
	var end time.Time
	if p.cfg.Duration > 0 {
		end = start.Add(p.cfg.Duration)
	}
	per := int64(max(p.cfg.Batch, 1))
	var wg sync.WaitGroup
	for range p.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hi := p.next.Add(per)
				lo := hi - per
				if lo >= p.cfg.Count {
					return
				}
				hi = min(hi, p.cfg.Count)
				stamp, ok := awaitSchedule(ctx, start, lo, p.cfg.Rate)
				if !ok {
					return
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

// awaitSchedule waits until event i of a run started at start is due at
// rate (events/s; 0: now) and returns its stamp, false if ctx ended first.
// The schedule is fixed (event i at start + i/rate) and latency counts
// from it, so a lagging generator does not hide queueing.
func awaitSchedule(ctx context.Context, start time.Time, i int64, rate float64) (time.Time, bool) {
	if rate <= 0 {
		return time.Now(), true
	}
	stamp := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
	if d := time.Until(stamp); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return stamp, false
		}
	}
	return stamp, true
}

func (p *publisher) publish(ctx context.Context, n int, stamp time.Time) {
	t0 := time.Now()
	var (
		accepted, deliveries int64
		err                  error
	)
	if p.cfg.Batch > 0 {
		events := make([]json.RawMessage, n)
		for i := range events {
			events[i] = EventBody(p.eventType, stamp, p.pad)
		}
		accepted, deliveries, err = publishBatch(ctx, p.api, events)
	} else {
		var r *client.PublishResult
		if r, err = p.api.Publish(ctx, eventInput(p.eventType, stamp, p.pad)); err == nil {
			accepted, deliveries = 1, int64(r.Deliveries)
		}
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

// publishBatch publishes events through the batch API and counts the
// accepted ones and their deliveries.
func publishBatch(ctx context.Context, api *client.Client, events []json.RawMessage) (accepted, deliveries int64, err error) {
	out, err := api.PublishBatch(ctx, events)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range out.Results {
		if r.Status == "accepted" {
			accepted++
			if r.Deliveries != nil {
				deliveries += int64(*r.Deliveries)
			}
		}
	}
	return accepted, deliveries, nil
}

// publishBacklog subscribes a second endpoint that answers every request
// 500 to its own event type, publishes n events to it through the batch
// API, and returns once they are stored: their deliveries then go through
// the retry tiers while the measured run publishes (head-of-line test).
func publishBacklog(ctx context.Context, api *client.Client, failing *Receiver, eventType string, n int64, progress io.Writer) error {
	if _, err := createSubscription(ctx, api, failing.URL()+"/hook", eventType); err != nil {
		return err
	}
	body := EventBody(eventType, time.Now(), "")
	for done := int64(0); done < n; {
		k := min(n-done, MaxBatch)
		events := make([]json.RawMessage, k)
		for i := range events {
			events[i] = body
		}
		accepted, _, err := publishBatch(ctx, api, events)
		if err != nil {
			return fmt.Errorf("error publishing the backlog: %w", err)
		}
		if accepted != k {
			return fmt.Errorf("error publishing the backlog: %d of %d events accepted", accepted, k)
		}
		done += k
		if progress != nil {
			fmt.Fprintf(progress, "\rbacklog %d/%d", done, n)
		}
	}
	if progress != nil {
		fmt.Fprintln(progress)
	}
	return nil
}

func createSubscription(ctx context.Context, api *client.Client, hookURL, eventType string) (string, error) {
	sub, err := api.CreateSubscription(ctx, map[string]any{"url": hookURL, "event_types": []string{eventType}, "description": "herald bench"})
	if err != nil {
		return "", fmt.Errorf("error creating the bench subscription: %w", err)
	}
	return sub.ID, nil
}

// queueState reports whether herald has no pending or in-flight delivery
// left, and how many dead letters it holds.
func queueState(ctx context.Context, api *client.Client) (idle bool, dead int64, err error) {
	st, err := api.Stats(ctx)
	if err != nil {
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
func deadCount(ctx context.Context, api *client.Client, subIDs []string) (int64, error) {
	var n int64
	for _, id := range subIDs {
		p := client.DeliveryListParams{SubscriptionID: id, State: "dead", Limit: 1000}
		for {
			page, err := api.ListDeliveries(ctx, p)
			if err != nil {
				return 0, err
			}
			n += int64(len(page.Data))
			if page.NextCursor == nil || *page.NextCursor == "" {
				break
			}
			p.Cursor = *page.NextCursor
		}
	}
	return n, nil
}

// counters are the node's transaction and CPU counters from its /metrics.
type counters struct {
	ingest, completion, claims, direct int64
	ingestMeanMs                       float64
	// ingestSumS and completionSumS are the transactions' total seconds.
	ingestSumS, completionSumS float64
	// cpuSeconds is process_cpu_seconds_total: the node's user+system CPU.
	cpuSeconds float64
}

// nodeCounters reads the ingest commit and completion transaction counts
// (zeros when the node does not export them or /metrics is closed).
func nodeCounters(ctx context.Context, api *client.Client) (c counters) {
	m, err := api.Metrics(ctx)
	if err != nil {
		return c
	}
	c.ingest = int64(m["herald_ingest_commit_batch_size_count"])
	c.completion = int64(m["herald_completion_batch_size_count"])
	c.claims = int64(m["herald_claim_batch_size_count"])
	c.direct = int64(m["herald_direct_dispatch_total"])
	c.cpuSeconds = m["process_cpu_seconds_total"]
	c.ingestSumS = m["herald_ingest_commit_duration_seconds_sum"]
	c.completionSumS = m["herald_completion_duration_seconds_sum"]
	if c.ingest > 0 {
		c.ingestMeanMs = m["herald_ingest_commit_duration_seconds_sum"] * 1000 / float64(c.ingest)
	}
	return c
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CheckLoopback refuses any URL whose host is not a loopback address or
// "localhost".
func CheckLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("bad URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q must be http:// or https://", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("bench targets loopback only; %q is not a loopback address", host)
	}
	return nil
}
