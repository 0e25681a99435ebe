package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/client"
)

// A --destination run measures herald delivering to a broker (or a push
// service) against that broker's own client:
//   - raw phase: the broker client alone publishes messages of the same
//     size, with their acknowledgement awaited (AMQP confirms of persistent
//     messages, JetStream PubAck, XADD's reply, MQTT QoS 1 PUBACK; for Web
//     Push, plain HTTP POSTs of the encrypted size), at the same
//     concurrency, for at most Config.CeilingMax. It runs before the node
//     starts, so the process's CPU is the client's alone. Nobody consumes
//     its messages: the most favourable case for the broker, so the ratio
//     errs against herald.
//   - herald phase: a connection and subscriptions of the type, a consumer
//     that timestamps every arrival (publish→broker latency), and the load
//     of an ordinary run.

// DestinationTypes are the values of --destination ("webhook" is the
// ordinary run).
var DestinationTypes = []string{"webhook", "amqp", "nats", "redis", "mqtt", "webpush"}

// DefaultBrokerURL is the machine's broker of each broker type (the
// addresses .ci/run starts them on); "" for webhook and webpush, which use
// bench's own receiver.
func DefaultBrokerURL(typ string) string {
	switch typ {
	case "amqp":
		return "amqp://guest:guest@127.0.0.1:5672/"
	case "nats":
		return "nats://127.0.0.1:4222"
	case "redis":
		return "redis://127.0.0.1:6379/0"
	case "mqtt":
		return "mqtt://127.0.0.1:1883"
	}
	return ""
}

// CheckBrokerURL refuses a broker URL whose scheme is not the type's or
// whose host is not a loopback address (bench loads loopback only).
func CheckBrokerURL(typ, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("bad --broker-url %q: %w", raw, err)
	}
	schemes := map[string][]string{
		"amqp": {"amqp"}, "nats": {"nats"}, "redis": {"redis"}, "mqtt": {"mqtt", "tcp"},
	}[typ]
	if !slices.Contains(schemes, u.Scheme) {
		return fmt.Errorf("--broker-url for %s must be %s://…", typ, schemes[0])
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("bench uses a loopback broker only; %q is not a loopback address", host)
	}
	return nil
}

// DestinationResult is a --destination run's broker side.
type DestinationResult struct {
	// Type is the destination type; BrokerURL the broker (password
	// masked; the push service's URL for webpush).
	Type      string `json:"type"`
	BrokerURL string `json:"broker_url"`
	// Raw is the broker client's own publish-with-ack run.
	Raw RawResult `json:"raw"`
	// HeraldPerSecond is herald's deliveries/s (deliveries_per_second) and
	// Ratio HeraldPerSecond ÷ Raw.PerSecond.
	HeraldPerSecond float64 `json:"herald_per_second"`
	Ratio           float64 `json:"ratio"`
	// Publish→broker latency (event publish, or its slot on the --rate
	// schedule, to the consumer's receipt): latency_p50_ms and
	// latency_p99_ms of the Result, repeated here under their name.
	PublishToBrokerP50Ms float64 `json:"publish_to_broker_p50_ms"`
	PublishToBrokerP99Ms float64 `json:"publish_to_broker_p99_ms"`
	// CPUPerDeliveryUs is the bench process's user+system CPU during the
	// herald phase (publishers, consumer and, unless --target, the node)
	// per delivery, in µs (with --target, Result.CPUPerDeliveryUs is the
	// node's own);
	// ExtraCPUPerDeliveryUs is it minus Raw.CPUPerMessageUs: what herald
	// adds over publishing the message oneself (in-process runs only).
	CPUPerDeliveryUs      float64 `json:"cpu_us_per_delivery"`
	ExtraCPUPerDeliveryUs float64 `json:"extra_cpu_us_per_delivery,omitempty"`
	// Duplicates counts messages that arrived again with a webhook-id
	// already seen (redelivery after a failed acknowledgement); Invalid
	// counts messages without a readable bench stamp (webpush: that did
	// not decrypt).
	Duplicates int64 `json:"duplicates"`
	Invalid    int64 `json:"invalid"`
}

// RawResult is the broker client's own publish-with-ack run.
type RawResult struct {
	// Concurrency is the workers, each awaiting its acknowledgement.
	Concurrency int     `json:"concurrency"`
	Messages    int64   `json:"messages"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"per_second"`
	// P50Ms and P99Ms are the publish-with-ack call's latency.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// CPUPerMessageUs is the process's CPU during the run per message.
	CPUPerMessageUs float64 `json:"cpu_us_per_message"`
	Error           string  `json:"error,omitempty"`
}

// broker is one destination type's side of a run.
type broker interface {
	// rawWorker returns one raw publisher: publish sends body with the
	// header set of a herald message and waits for the broker's
	// acknowledgement. Each concurrent worker gets its own.
	rawWorker(ctx context.Context) (publish func(ctx context.Context, body []byte) error, release func(), err error)
	// rawBody is the raw phase's message for a herald body of this size
	// (webpush: the encrypted size).
	rawBody(body []byte) []byte
	// consume starts the herald phase's consumer, which reports every
	// message to a.
	consume(ctx context.Context, a *arrivals) error
	// connection is the connection to create (nil: the type needs none)
	// and destination the subscriptions' destination.
	connection(name string) *client.ConnectionInput
	destination(conn string) client.Destination
	// close stops the consumer and deletes what the run created on the
	// broker.
	close()
}

// newBroker connects to the broker of typ at rawURL and creates the run's
// queue, stream or topic names from run.
func newBroker(ctx context.Context, typ, rawURL, run string, concurrency int) (broker, error) {
	switch typ {
	case "amqp":
		return newAMQPBroker(ctx, rawURL, run)
	case "nats":
		return newNATSBroker(ctx, rawURL, run)
	case "redis":
		return newRedisBroker(ctx, rawURL, run, concurrency)
	case "mqtt":
		return newMQTTBroker(ctx, rawURL, run)
	case "webpush":
		return newPushService(run)
	}
	return nil, fmt.Errorf("unknown destination type %q", typ)
}

// rawHeaders are header values of a herald message's size: bench's raw
// messages carry them so the broker moves the same bytes.
func rawHeaders(eventType string, seq int64) map[string]string {
	id := fmt.Sprintf("dlv_bench%017d", seq)
	return map[string]string{
		"webhook-id":        id,
		"webhook-timestamp": strconv.FormatInt(time.Now().Unix(), 10),
		"webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
		"herald-event-type": eventType,
		"herald-attempt":    "1",
	}
}

// rawSeq numbers the raw phase's messages (their webhook-id).
var rawSeq atomic.Int64

// runRaw publishes body through b from concurrency workers until n
// messages were acknowledged or maxTime passed, and measures the rate, the
// call latency and the process's CPU per message.
func runRaw(ctx context.Context, b broker, body []byte, concurrency int, n int64, maxTime time.Duration) RawResult {
	ctx, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	msg := b.rawBody(body)
	var (
		next  atomic.Int64
		done  atomic.Int64
		rec   Recorder
		wg    sync.WaitGroup
		first atomic.Value
	)
	cpu0 := processCPU()
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			publish, release, err := b.rawWorker(ctx)
			if err != nil {
				first.CompareAndSwap(nil, err.Error())
				return
			}
			defer release()
			for next.Add(1) <= n && ctx.Err() == nil {
				t0 := time.Now()
				if err := publish(ctx, msg); err != nil {
					if ctx.Err() == nil {
						first.CompareAndSwap(nil, err.Error())
					}
					return
				}
				rec.Add(time.Since(t0))
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	q := rec.Quantiles(0.5, 0.99)
	res := RawResult{Messages: done.Load(), Seconds: elapsed.Seconds(), P50Ms: q[0], P99Ms: q[1]}
	if res.Messages > 0 {
		res.PerSecond = float64(res.Messages) / elapsed.Seconds()
		res.CPUPerMessageUs = cpu * 1e6 / float64(res.Messages)
	}
	if msg, ok := first.Load().(string); ok {
		res.Error = msg
	}
	return res
}

// sink is where a run counts deliveries: the webhook Receiver, or the
// arrivals of a broker consumer.
type sink interface {
	Delivered() int64
	Failed() int64
	LastDelivered() time.Time
	Latency() *Recorder
}

// maxTracked bounds the webhook-ids arrivals remembers for duplicate
// counting (about 100 MB); past it, messages count without the check.
const maxTracked = 1_000_000

// arrivals counts and times what a broker consumer receives.
type arrivals struct {
	latency    Recorder
	mu         sync.Mutex
	seen       map[string]struct{}
	delivered  atomic.Int64
	duplicates atomic.Int64
	invalid    atomic.Int64
	lastOK     atomic.Int64

	// sealed holds webpush bodies (and their arrival) until finish
	// decrypts them, outside the measured CPU.
	sealed []sealedArrival
	open   func(body []byte) ([]byte, error)
}

type sealedArrival struct {
	at   time.Time
	body []byte
}

func newArrivals() *arrivals { return &arrivals{seen: map[string]struct{}{}} }

// arrived records one message with webhook-id id (empty: unknown) that
// arrived at at.
func (a *arrivals) arrived(id string, body []byte, at time.Time) {
	if id != "" {
		a.mu.Lock()
		_, dup := a.seen[id]
		if !dup && len(a.seen) < maxTracked {
			a.seen[id] = struct{}{}
		}
		a.mu.Unlock()
		if dup {
			a.duplicates.Add(1)
			return
		}
	}
	if t, ok := stampOf(body); ok {
		a.latency.Add(at.Sub(time.Unix(0, t)))
	} else {
		a.invalid.Add(1)
	}
	a.lastOK.Store(at.UnixNano())
	a.delivered.Add(1)
}

// maxSealed bounds the encrypted bodies kept for finish (about 250 MB of
// 1 KiB events): the latency of a longer webpush run is its first
// maxSealed messages'.
const maxSealed = 200_000

// arrivedSealed records an encrypted message; finish decrypts it.
func (a *arrivals) arrivedSealed(body []byte, at time.Time) {
	a.mu.Lock()
	if len(a.sealed) < maxSealed {
		a.sealed = append(a.sealed, sealedArrival{at: at, body: body})
	}
	a.mu.Unlock()
	a.lastOK.Store(at.UnixNano())
	a.delivered.Add(1)
}

// finish decrypts the sealed messages and records their latency.
func (a *arrivals) finish() {
	a.mu.Lock()
	sealed := a.sealed
	a.sealed = nil
	a.mu.Unlock()
	for _, s := range sealed {
		plain, err := a.open(s.body)
		if err != nil {
			a.invalid.Add(1)
			continue
		}
		if t, ok := stampOf(plain); ok {
			a.latency.Add(s.at.Sub(time.Unix(0, t)))
		} else {
			a.invalid.Add(1)
		}
	}
}

func (a *arrivals) Delivered() int64 { return a.delivered.Load() }
func (a *arrivals) Failed() int64    { return 0 }
func (a *arrivals) Latency() *Recorder {
	return &a.latency
}

func (a *arrivals) LastDelivered() time.Time {
	n := a.lastOK.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// destRun is the broker side of a --destination run.
type destRun struct {
	typ      string
	b        broker
	arr      *arrivals
	connName string
}

// setup creates the herald phase's connection (when the type
// uses one) and starts the consumer; it returns the subscription's
// destination.
func (d *destRun) setup(ctx context.Context, api *client.Client, run string) (client.Destination, error) {
	if in := d.b.connection("bench-" + run); in != nil {
		if _, err := api.CreateConnection(ctx, *in); err != nil {
			return client.Destination{}, fmt.Errorf("error creating the bench connection: %w", err)
		}
		d.connName = "bench-" + run
	}
	if err := d.b.consume(ctx, d.arr); err != nil {
		return client.Destination{}, fmt.Errorf("error starting the %s consumer: %w", d.typ, err)
	}
	return d.b.destination(d.connName), nil
}

// connectionInput is a broker connection open to every tenant.
func connectionInput(name, typ, url string) *client.ConnectionInput {
	return &client.ConnectionInput{Name: name, Type: typ, URL: url, Tenants: client.ConnectionTenants{All: true}}
}

func createDestSubscription(ctx context.Context, api *client.Client, dest client.Destination, eventType string) (string, error) {
	sub, err := api.CreateSubscription(ctx, map[string]any{"destination": dest, "event_types": []string{eventType}, "description": "herald bench"})
	if err != nil {
		return "", fmt.Errorf("error creating the bench subscription: %w", err)
	}
	return sub.ID, nil
}

// redact masks a URL's password.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}

var errNacked = errors.New("broker did not acknowledge")
