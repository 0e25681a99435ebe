package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/client"
)

// A --source run measures herald consuming a broker against that broker's
// own client consuming alone:
//   - raw phase: Count messages are preloaded into a queue (stream) of
//     the run, then the broker's client library alone consumes and
//     acknowledges them, with the same prefetch herald uses. It runs
//     before the node starts, so the process's CPU is the consumer's.
//   - herald phase: Count messages are preloaded into a second queue, then
//     a connection and a source reading it are created; the phase lasts
//     until the node's herald_source_consumed_total reaches Count: events
//     stored (group-committed) and acknowledged per second.
//   - latency phase: a webhook subscription to bench's receiver, and
//     LatencyCount messages published to the broker at Rate per second,
//     each stamped with its scheduled time: broker publish → webhook
//     delivered.
// MQTT keeps nothing for a topic nobody subscribed to, so its two
// throughput phases subscribe first and publish while consuming (both
// alike, so the ratio stays fair).

// SourceTypes are the values of --source.
var SourceTypes = []string{"amqp", "nats", "redis", "mqtt"}

// SourceConfig configures a --source run.
type SourceConfig struct {
	Type, BrokerURL string
	// Count is the messages of each throughput phase; Payload their data
	// size; Prefetch the raw consumer's and the source's prefetch (0: 256,
	// herald's default).
	Count    int64
	Payload  int
	Prefetch int
	// Rate and LatencyCount shape the latency phase (0 LatencyCount skips
	// it).
	Rate         float64
	LatencyCount int64
	// Wait bounds each phase.
	Wait     time.Duration
	Progress io.Writer
}

// SourcePhase is one throughput phase.
type SourcePhase struct {
	Messages  int64   `json:"messages"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// CPUPerMessageUs is the process's CPU per message (with --target, the
	// herald phase's is the node's own, from its /metrics).
	CPUPerMessageUs float64 `json:"cpu_us_per_message"`
	Error           string  `json:"error,omitempty"`
}

// SourceResult is a --source run.
type SourceResult struct {
	Type      string      `json:"type"`
	BrokerURL string      `json:"broker_url"`
	Target    string      `json:"target"`
	PayloadB  int         `json:"payload_bytes"`
	Prefetch  int         `json:"prefetch"`
	Raw       SourcePhase `json:"raw"`
	Herald    SourcePhase `json:"herald"`
	// Ratio is Herald.PerSecond ÷ Raw.PerSecond.
	Ratio float64 `json:"ratio"`
	// Latency phase: broker publish (scheduled time) → webhook delivered.
	Rate             float64 `json:"rate"`
	LatencyMessages  int64   `json:"latency_messages"`
	LatencyDelivered int64   `json:"latency_delivered"`
	LatencyP50Ms     float64 `json:"latency_p50_ms"`
	LatencyP99Ms     float64 `json:"latency_p99_ms"`
	LatencyMaxMs     float64 `json:"latency_max_ms"`
	Rejected         int64   `json:"rejected"`
	Duplicates       int64   `json:"duplicates"`
	SourceStateAtEnd string  `json:"source_state_at_end"`
	SourceLastError  string  `json:"source_last_error,omitempty"`
}

// sourceBroker is one broker type's side of a --source run. Places are
// queues, streams or topics named by the run.
type sourceBroker interface {
	// place creates (or names) a place to read; herald's source reads
	// what sourceInput returns for it.
	place(ctx context.Context, suffix string) (string, error)
	// preload publishes n messages body(i) to place, durably, and returns
	// when the broker acknowledged them all. Not for MQTT (live).
	preload(ctx context.Context, place string, n int64, body func(i int64) []byte) error
	// rawConsume consumes and acknowledges n messages of place with the
	// client library alone (prefetch bounded); for a live broker it
	// subscribes, calls ready, then keeps consuming.
	rawConsume(ctx context.Context, place string, n int64, prefetch int, ready func()) error
	// publisher returns a function publishing one message to place,
	// awaiting the broker's acknowledgement.
	publisher(ctx context.Context, place string) (func(ctx context.Context, body []byte) error, error)
	// live reports a broker that keeps nothing for absent subscribers.
	live() bool
	sourceInput(name, conn, place string) client.SourceInput
	close()
}

func newSourceBroker(ctx context.Context, typ, rawURL, run string) (sourceBroker, error) {
	switch typ {
	case "amqp":
		return newAMQPSourceBroker(ctx, rawURL, run)
	case "nats":
		return newNATSSourceBroker(ctx, rawURL, run)
	case "redis":
		return newRedisSourceBroker(ctx, rawURL, run)
	case "mqtt":
		return newMQTTSourceBroker(ctx, rawURL, run)
	}
	return nil, fmt.Errorf("unknown source type %q", typ)
}

// RunSource runs a --source measurement. start starts (or names) the
// node, as for Run.
func RunSource(ctx context.Context, cfg SourceConfig, start func(context.Context) (Node, func(), error)) (*SourceResult, error) {
	if cfg.BrokerURL == "" {
		cfg.BrokerURL = DefaultBrokerURL(cfg.Type)
	}
	if cfg.Prefetch <= 0 {
		cfg.Prefetch = 256
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 2 * time.Minute
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	run := randomHex(4)
	eventType := "bench." + run
	pad := Pad(cfg.Payload)
	body := func(int64) []byte { return EventBody(eventType+".load", time.Now(), pad) }
	res := &SourceResult{Type: cfg.Type, BrokerURL: redact(cfg.BrokerURL), PayloadB: cfg.Payload, Prefetch: cfg.Prefetch,
		Rate: cfg.Rate}

	b, err := newSourceBroker(ctx, cfg.Type, cfg.BrokerURL, run)
	if err != nil {
		return nil, err
	}
	defer b.close()

	// Raw phase.
	rawPlace, err := b.place(ctx, "raw")
	if err != nil {
		return nil, err
	}
	progress("raw: %d messages through the %s client alone", cfg.Count, cfg.Type)
	res.Raw = rawPhase(ctx, b, rawPlace, cfg, body)
	if res.Raw.Error != "" && res.Raw.Messages == 0 {
		return nil, fmt.Errorf("raw %s consume: %s", cfg.Type, res.Raw.Error)
	}

	// Herald phase.
	recv, err := NewReceiver(ReceiverConfig{})
	if err != nil {
		return nil, err
	}
	defer recv.Close()
	node, stop, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	api := client.New(node.URL, node.Token)
	place, err := b.place(ctx, "herald")
	if err != nil {
		return nil, err
	}
	connName, srcName := "bench-"+run, "bench-"+run
	if _, err := api.CreateConnection(ctx, *connectionInput(connName, cfg.Type, cfg.BrokerURL)); err != nil {
		return nil, fmt.Errorf("error creating the bench connection: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = api.DeleteSource(cctx, srcName)
		_ = api.DeleteConnection(cctx, connName)
	}()
	in := b.sourceInput(srcName, connName, place)
	in.Prefetch = cfg.Prefetch
	in.Mapping = &client.SourceMapping{Type: "body.type", Data: "body.data"}
	progress("herald: %d messages through source %s", cfg.Count, srcName)
	res.Herald = heraldPhase(ctx, api, node, b, place, in, cfg, body)

	// Latency phase.
	if cfg.LatencyCount > 0 && cfg.Rate > 0 {
		progress("latency: %d messages at %.0f/s, broker publish → webhook", cfg.LatencyCount, cfg.Rate)
		if err := latencyPhase(ctx, api, b, place, recv, eventType, pad, cfg, res); err != nil {
			return nil, err
		}
	}
	m, _ := api.Metrics(ctx)
	res.Duplicates = int64(m[`herald_source_duplicates_total{source="`+srcName+`"}`])
	for k, v := range m {
		if strings.HasPrefix(k, `herald_source_rejected_total{`) && strings.Contains(k, `source="`+srcName+`"`) {
			res.Rejected += int64(v)
		}
	}
	if s, err := api.GetSource(ctx, srcName); err == nil && s.Status != nil {
		res.SourceStateAtEnd, res.SourceLastError = s.Status.State, s.Status.LastError
	}
	if res.Raw.PerSecond > 0 {
		res.Ratio = res.Herald.PerSecond / res.Raw.PerSecond
	}
	return res, nil
}

func rawPhase(ctx context.Context, b sourceBroker, place string, cfg SourceConfig, body func(int64) []byte) SourcePhase {
	ctx, cancel := context.WithTimeout(ctx, cfg.Wait)
	defer cancel()
	var ph SourcePhase
	var cpu0 float64
	var start time.Time
	if b.live() {
		errc := make(chan error, 1)
		ready := make(chan struct{})
		go func() { errc <- b.rawConsume(ctx, place, cfg.Count, cfg.Prefetch, func() { close(ready) }) }()
		select {
		case <-ready:
		case err := <-errc:
			ph.Error = fmt.Sprint(err)
			return ph
		}
		cpu0, start = processCPU(), time.Now()
		if err := b.preload(ctx, place, cfg.Count, body); err != nil {
			ph.Error = err.Error()
			return ph
		}
		if err := <-errc; err != nil {
			ph.Error = err.Error()
			return ph
		}
	} else {
		if err := b.preload(ctx, place, cfg.Count, body); err != nil {
			ph.Error = err.Error()
			return ph
		}
		cpu0, start = processCPU(), time.Now()
		if err := b.rawConsume(ctx, place, cfg.Count, cfg.Prefetch, func() {}); err != nil {
			ph.Error = err.Error()
			return ph
		}
	}
	ph.Messages = cfg.Count
	ph.Seconds = time.Since(start).Seconds()
	ph.PerSecond = float64(cfg.Count) / ph.Seconds
	ph.CPUPerMessageUs = (processCPU() - cpu0) * 1e6 / float64(cfg.Count)
	return ph
}

// consumed reads the node's herald_source_consumed_total for name.
func consumed(ctx context.Context, api *client.Client, name string) (int64, float64) {
	m, err := api.Metrics(ctx)
	if err != nil {
		return 0, 0
	}
	return int64(m[`herald_source_consumed_total{source="`+name+`"}`]), m["process_cpu_seconds_total"]
}

func heraldPhase(ctx context.Context, api *client.Client, node Node, b sourceBroker, place string, in client.SourceInput,
	cfg SourceConfig, body func(int64) []byte) SourcePhase {
	ctx, cancel := context.WithTimeout(ctx, cfg.Wait)
	defer cancel()
	var ph SourcePhase
	if !b.live() {
		if err := b.preload(ctx, place, cfg.Count, body); err != nil {
			ph.Error = err.Error()
			return ph
		}
	}
	cpu0 := processCPU()
	_, nodeCPU0 := consumed(ctx, api, in.Name)
	start := time.Now()
	if _, err := api.CreateSource(ctx, in); err != nil {
		ph.Error = "creating the source: " + err.Error()
		return ph
	}
	if b.live() {
		// Wait until herald subscribed, then publish while it consumes.
		for {
			s, err := api.GetSource(ctx, in.Name)
			if err == nil && s.Status != nil && s.Status.State == "consuming" {
				break
			}
			if ctx.Err() != nil {
				ph.Error = "the source never started consuming"
				return ph
			}
			time.Sleep(20 * time.Millisecond)
		}
		cpu0, start = processCPU(), time.Now()
		_, nodeCPU0 = consumed(ctx, api, in.Name)
		if err := b.preload(ctx, place, cfg.Count, body); err != nil {
			ph.Error = err.Error()
			return ph
		}
	}
	var n int64
	var nodeCPU float64
	for {
		n, nodeCPU = consumed(ctx, api, in.Name)
		if n >= cfg.Count {
			break
		}
		if ctx.Err() != nil {
			ph.Error = fmt.Sprintf("only %d of %d consumed within %s", n, cfg.Count, cfg.Wait)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ph.Messages = n
	ph.Seconds = time.Since(start).Seconds()
	if n > 0 {
		ph.PerSecond = float64(n) / ph.Seconds
		if node.Remote {
			ph.CPUPerMessageUs = (nodeCPU - nodeCPU0) * 1e6 / float64(n)
		} else {
			ph.CPUPerMessageUs = (processCPU() - cpu0) * 1e6 / float64(n)
		}
	}
	return ph
}

func latencyPhase(ctx context.Context, api *client.Client, b sourceBroker, place string, recv *Receiver, eventType, pad string,
	cfg SourceConfig, res *SourceResult) error {
	typ := eventType + ".latency"
	subID, err := createSubscription(ctx, api, recv.URL()+"/hook", typ)
	if err != nil {
		return err
	}
	defer func() { _ = api.DeleteSubscription(context.Background(), subID) }()
	publish, err := b.publisher(ctx, place)
	if err != nil {
		return err
	}
	mark := recv.Latency().Mark()
	base := recv.Delivered()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	start := time.Now()
	var sent int64
	for i := int64(0); i < cfg.LatencyCount && ctx.Err() == nil; i++ {
		slot := start.Add(time.Duration(i) * interval)
		if d := time.Until(slot); d > 0 {
			time.Sleep(d)
		}
		if err := publish(ctx, EventBody(typ, slot, pad)); err != nil {
			return fmt.Errorf("latency publish: %w", err)
		}
		sent++
	}
	res.LatencyMessages = sent
	deadline := time.Now().Add(cfg.Wait)
	for recv.Delivered()-base < sent && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	res.LatencyDelivered = recv.Delivered() - base
	q := recv.Latency().QuantilesSince(mark, 0.5, 0.99, 1)
	res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs = q[0], q[1], q[2]
	return nil
}

// WriteSourceReport prints a --source run.
func WriteSourceReport(w io.Writer, r *SourceResult) {
	fmt.Fprintf(w, "source %s (%s), target %s, %d B payload, prefetch %d\n", r.Type, r.BrokerURL, r.Target, r.PayloadB, r.Prefetch)
	phase := func(name string, p SourcePhase) {
		fmt.Fprintf(w, "  %-7s %7d messages in %6.2f s = %8.0f/s, %6.1f µs CPU/message", name, p.Messages, p.Seconds, p.PerSecond, p.CPUPerMessageUs)
		if p.Error != "" {
			fmt.Fprintf(w, "  (%s)", p.Error)
		}
		fmt.Fprintln(w)
	}
	phase("raw", r.Raw)
	phase("herald", r.Herald)
	fmt.Fprintf(w, "  herald ÷ raw: %s\n", strconv.FormatFloat(r.Ratio, 'f', 2, 64))
	if r.LatencyMessages > 0 {
		fmt.Fprintf(w, "  broker publish → webhook at %.0f/s: %d/%d delivered, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
			r.Rate, r.LatencyDelivered, r.LatencyMessages, r.LatencyP50Ms, r.LatencyP99Ms, r.LatencyMaxMs)
	}
	fmt.Fprintf(w, "  source at end: %s; duplicates %d, rejected %d", r.SourceStateAtEnd, r.Duplicates, r.Rejected)
	if r.SourceLastError != "" {
		fmt.Fprintf(w, " (last error: %s)", r.SourceLastError)
	}
	fmt.Fprintln(w)
}
