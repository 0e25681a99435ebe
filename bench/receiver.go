package bench

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/client"
)

// StampField is the data field that carries the time (Unix nanoseconds) an
// event was published or scheduled; the receiver reads it back to measure
// publish→delivery latency without a lookup.
const StampField = "bench_t"

var stampKey = []byte(`"` + StampField + `":`)

// EventBody returns a publish body whose data is about payload bytes:
// {"type":typ,"data":{"bench_t":<stamp>,"pad":"xxx…"}}.
func EventBody(typ string, stamp time.Time, pad string) []byte {
	data := eventData(stamp, pad)
	b := make([]byte, 0, len(data)+len(typ)+24)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","data":`...)
	b = append(b, data...)
	b = append(b, '}')
	return b
}

// eventInput is EventBody as the client's publish input.
func eventInput(typ string, stamp time.Time, pad string) client.EventInput {
	return client.EventInput{Type: typ, Data: eventData(stamp, pad)}
}

// eventData is EventBody's data object: {"bench_t":<stamp>,"pad":"xxx…"}.
func eventData(stamp time.Time, pad string) []byte {
	b := make([]byte, 0, len(pad)+64)
	b = append(b, '{')
	b = append(b, stampKey...)
	b = strconv.AppendInt(b, stamp.UnixNano(), 10)
	b = append(b, `,"pad":"`...)
	b = append(b, pad...)
	b = append(b, `"}`...)
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
