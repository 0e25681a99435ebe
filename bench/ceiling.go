package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// CeilingResult is the raw HTTP ceiling: plain net/http POSTs to the same
// receiver with the same bodies and concurrency.
type CeilingResult struct {
	Requests  int64   `json:"requests"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	// CPUMicros is this process's CPU per request during the run: the
	// client's and the in-process server's together.
	CPUMicros float64 `json:"cpu_us_per_request"`
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
	start, cpu0 := time.Now(), processCPU()
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
	elapsed, cpu := time.Since(start), processCPU()-cpu0
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
	res.CPUMicros = cpu * 1e6 / float64(res.Requests)
	return res, nil
}

// ceilingBody is a body the size of herald's deliveries of the same events.
func ceilingBody(eventType, pad string) []byte {
	ev := EventBody(eventType, time.Now(), pad)
	var b bytes.Buffer
	b.WriteString(`{"id":"evt_01kb2t3x4y5z6a7b8c9d0e1f2g","type":"` + eventType + `","timestamp":"2026-11-22T07:30:00.000Z","data":`)
	// EventBody is {"type":…,"data":{…}}; take the data object.
	i := bytes.Index(ev, []byte(`"data":`))
	b.Write(ev[i+len(`"data":`) : len(ev)-1])
	b.WriteByte('}')
	return b.Bytes()
}
