package bench

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

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
