// Package bench holds the pieces of `herald bench` that do not depend on
// herald's wiring: a local webhook receiver that timestamps what it gets, a
// latency recorder, the raw net/http ceiling run and the result summary.
// cmd/herald/bench.go wires them to an in-process or remote herald.
//
// Every bench run talks to loopback only (CheckLoopback): it is a load
// generator, and must not be pointable at somebody else's server.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// StampField is the data field that carries the time (Unix nanoseconds) an
// event was published or scheduled; the receiver reads it back to measure
// publish→delivery latency without a lookup.
const StampField = "bench_t"

var stampKey = []byte(`"` + StampField + `":`)

// EventBody returns a publish body whose data is about payload bytes:
// {"type":typ,"data":{"bench_t":<stamp>,"pad":"xxx…"}}.
func EventBody(typ string, stamp time.Time, pad string) []byte {
	b := make([]byte, 0, len(pad)+96)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","data":{`...)
	b = append(b, stampKey...)
	b = strconv.AppendInt(b, stamp.UnixNano(), 10)
	b = append(b, `,"pad":"`...)
	b = append(b, pad...)
	b = append(b, `"}}`...)
	return b
}

// Pad returns the padding that makes EventBody's data about payload bytes.
func Pad(payload int) string {
	n := max(payload-len(`{"bench_t":1234567890123456789,"pad":""}`), 0)
	return string(bytes.Repeat([]byte("x"), n))
}

// stampOf finds bench_t in a delivered body.
func stampOf(body []byte) (int64, bool) {
	i := bytes.Index(body, stampKey)
	if i < 0 {
		return 0, false
	}
	rest := body[i+len(stampKey):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return v, err == nil
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

// Recorder keeps latency samples (bounded: past MaxSamples it keeps counting
// but drops samples).
type Recorder struct {
	mu      sync.Mutex
	samples []time.Duration
	count   atomic.Int64
}

// MaxSamples bounds a Recorder's memory (80 MB).
const MaxSamples = 10_000_000

// Add records one latency.
func (r *Recorder) Add(d time.Duration) {
	r.count.Add(1)
	r.mu.Lock()
	if len(r.samples) < MaxSamples {
		r.samples = append(r.samples, d)
	}
	r.mu.Unlock()
}

// Quantiles returns the latencies at each q (0..1), in milliseconds; zeros
// when nothing was recorded.
func (r *Recorder) Quantiles(qs ...float64) []float64 {
	return r.QuantilesSince(0, qs...)
}

// Mark is a position in the recorded samples, for QuantilesSince.
func (r *Recorder) Mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.samples)
}

// QuantilesSince is Quantiles over the samples recorded after mark.
func (r *Recorder) QuantilesSince(mark int, qs ...float64) []float64 {
	r.mu.Lock()
	s := slices.Clone(r.samples[min(mark, len(r.samples)):])
	r.mu.Unlock()
	out := make([]float64, len(qs))
	if len(s) == 0 {
		return out
	}
	slices.Sort(s)
	for i, q := range qs {
		k := min(int(q*float64(len(s))), len(s)-1)
		out[i] = float64(s[k].Microseconds()) / 1000
	}
	return out
}

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// FailRatio is the share of requests answered 500 (0..1), spread
	// evenly (every 1/FailRatio-th request), so runs are repeatable.
	FailRatio float64
	// Delay is how long each request is held before the answer.
	Delay time.Duration
}

// Receiver is a local webhook endpoint. Requests to /hook are herald's
// deliveries (counted and timed); requests to /ceiling are the raw client's
// (counted apart).
type Receiver struct {
	cfg     ReceiverConfig
	srv     *http.Server
	ln      net.Listener
	latency Recorder

	requests  atomic.Int64
	delivered atomic.Int64 // 2xx answered to /hook
	failed    atomic.Int64
	lastOK    atomic.Int64 // unix nanos of the last 2xx to /hook
	ceiling   atomic.Int64
	failEvery int64
}

// NewReceiver listens on 127.0.0.1 (a free port) and serves until Close.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{cfg: cfg, ln: ln}
	if cfg.FailRatio > 0 {
		r.failEvery = max(int64(1/cfg.FailRatio+0.5), 1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", r.hook)
	mux.HandleFunc("/ceiling", r.ceilingHook)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// URL returns the receiver's base URL (http://127.0.0.1:port).
func (r *Receiver) URL() string { return "http://" + r.ln.Addr().String() }

// Close stops the receiver.
func (r *Receiver) Close() error { return r.srv.Close() }

func (r *Receiver) fail() bool {
	n := r.requests.Add(1)
	return r.failEvery > 0 && n%r.failEvery == 0
}

func (r *Receiver) hook(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if r.cfg.Delay > 0 {
		time.Sleep(r.cfg.Delay)
	}
	if r.fail() {
		r.failed.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	now := time.Now()
	if t, ok := stampOf(body); ok {
		r.latency.Add(now.Sub(time.Unix(0, t)))
	}
	r.lastOK.Store(now.UnixNano())
	r.delivered.Add(1)
	w.WriteHeader(http.StatusOK)
}

func (r *Receiver) ceilingHook(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	if r.cfg.Delay > 0 {
		time.Sleep(r.cfg.Delay)
	}
	r.ceiling.Add(1)
	if r.fail() {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Delivered counts 2xx answers to herald's deliveries.
func (r *Receiver) Delivered() int64 { return r.delivered.Load() }

// Failed counts deliveries answered 500 on purpose.
func (r *Receiver) Failed() int64 { return r.failed.Load() }

// LastDelivered is when the last delivery was answered 2xx (zero if none).
func (r *Receiver) LastDelivered() time.Time {
	n := r.lastOK.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Latency is the publish→delivery latency recorder.
func (r *Receiver) Latency() *Recorder { return &r.latency }

// CeilingResult is the raw HTTP ceiling: plain net/http POSTs to the same
// receiver with the same bodies and concurrency.
type CeilingResult struct {
	Requests  int64   `json:"requests"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
}

// Ceiling posts body to the receiver's /ceiling path n times (or until
// maxTime passes) from concurrency goroutines sharing one keep-alive
// transport, and reports the rate.
func Ceiling(ctx context.Context, r *Receiver, body []byte, concurrency int, n int64, maxTime time.Duration) (CeilingResult, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: concurrency, MaxIdleConns: 0, IdleConnTimeout: 30 * time.Second, Proxy: nil}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	u := r.URL() + "/ceiling"
	var (
		next  atomic.Int64
		done  atomic.Int64
		rec   Recorder
		wg    sync.WaitGroup
		first atomic.Value
	)
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= n && ctx.Err() == nil {
				t0 := time.Now()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						first.CompareAndSwap(nil, err)
					}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				rec.Add(time.Since(t0))
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, ok := first.Load().(error); ok && err != nil && done.Load() == 0 {
		return CeilingResult{}, fmt.Errorf("ceiling run: %w", err)
	}
	q := rec.Quantiles(0.5, 0.99)
	res := CeilingResult{Requests: done.Load(), Seconds: elapsed.Seconds(), P50Ms: q[0], P99Ms: q[1]}
	if elapsed > 0 {
		res.PerSecond = float64(res.Requests) / elapsed.Seconds()
	}
	if res.Requests == 0 {
		return res, errors.New("ceiling run: no request completed")
	}
	return res, nil
}
