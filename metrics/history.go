package metrics

import (
	"math"
	"sync"
	"time"

	"github.com/heraldhq/herald/delivery"
)

// History limits: the dashboard's overview charts show the last hour in
// 10-second points. The whole ring is HistoryPoints buckets of a few
// counters and a latency histogram (about 1 KiB each), allocated once.
const (
	HistoryInterval = 10 * time.Second
	HistoryPoints   = 360
)

// latencyBounds are the upper bounds of the latency histogram's buckets:
// 1 ms to about 17 minutes in steps of 15%, so a quantile read from it is
// within 15% of the true value. Larger latencies fall in the last bucket.
var latencyBounds = func() []time.Duration {
	var b []time.Duration
	for v := float64(time.Millisecond); v < float64(17*time.Minute); v *= 1.15 {
		b = append(b, time.Duration(v))
	}
	return b
}()

type historyBucket struct {
	// slot is the bucket's time (unix time / interval); a bucket whose slot
	// is not the one asked for is stale and counts as empty.
	slot                               int64
	published, delivered, failed, dead int
	latency                            []uint32 // per latencyBounds, plus one overflow bucket
}

// History keeps this node's publish and delivery counts of the last hour in
// memory, so the dashboard can chart them without an external Prometheus.
// It implements the parts of ingest.Observer and delivery.Observer it
// needs (Observer forwards to it). Safe for concurrent use; each call holds
// a mutex for a few counter increments.
type History struct {
	now func() time.Time
	// started is when the history began (the process started): intervals
	// before it are unknown, not empty.
	started time.Time
	mu      sync.Mutex
	buckets [HistoryPoints]historyBucket
}

// NewHistory returns an empty history on clock now (nil: time.Now).
func NewHistory(now func() time.Time) *History {
	if now == nil {
		now = time.Now
	}
	h := &History{now: now, started: now()}
	for i := range h.buckets {
		h.buckets[i].latency = make([]uint32, len(latencyBounds)+1)
		h.buckets[i].slot = -1
	}
	return h
}

func slotOf(t time.Time) int64 { return t.UnixNano() / int64(HistoryInterval) }

// bucket returns the current bucket, emptied if it held an older slot.
// Call with mu held.
func (h *History) bucket() *historyBucket {
	slot := slotOf(h.now())
	b := &h.buckets[slot%HistoryPoints]
	if b.slot != slot {
		b.slot = slot
		b.published, b.delivered, b.failed, b.dead = 0, 0, 0, 0
		clear(b.latency)
	}
	return b
}

// AddPublished counts n events stored.
func (h *History) AddPublished(n int) {
	h.mu.Lock()
	h.bucket().published += n
	h.mu.Unlock()
}

// ObserveAttempt counts one attempt's outcome (stale attempts changed
// nothing and are not counted).
func (h *History) ObserveAttempt(a *delivery.AttemptObservation) {
	if a.Stale {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.bucket()
	switch a.Outcome {
	case delivery.OutcomeDelivered:
		b.delivered++
		// A redriven delivery's latency counts the time it lay dead: it
		// would chart an operator's redrive as a latency spike.
		if !a.EventCreatedAt.IsZero() && !a.Redriven {
			lat := max(a.FinishedAt.Sub(a.EventCreatedAt), 0)
			i := 0
			for i < len(latencyBounds) && lat > latencyBounds[i] {
				i++
			}
			b.latency[i]++
		}
	case delivery.OutcomeRetry:
		b.failed++
	case delivery.OutcomeDead, delivery.OutcomeGone:
		b.dead++
	}
}

// HistoryPoint is one interval of History.
type HistoryPoint struct {
	// At is the start of the interval.
	At                                 time.Time
	Published, Delivered, Failed, Dead int
	// LatencyP50 and LatencyP99 estimate publish→delivery latency of the
	// deliveries that succeeded in the interval (within 15%), redriven
	// dead letters left out (Delivered still counts them); nil when none
	// did.
	LatencyP50, LatencyP99 *time.Duration
}

// Started returns when the history began: its points before then are
// unknown (the process was not running), not empty.
func (h *History) Started() time.Time { return h.started }

// Points returns the last hour, oldest first, one point per interval up to
// the current (partial) one, empty intervals included.
func (h *History) Points() []HistoryPoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := slotOf(h.now())
	out := make([]HistoryPoint, 0, HistoryPoints)
	for slot := cur - HistoryPoints + 1; slot <= cur; slot++ {
		if slot < 0 {
			continue
		}
		p := HistoryPoint{At: time.Unix(0, slot*int64(HistoryInterval)).UTC()}
		if b := &h.buckets[slot%HistoryPoints]; b.slot == slot {
			p.Published, p.Delivered, p.Failed, p.Dead = b.published, b.delivered, b.failed, b.dead
			p.LatencyP50, p.LatencyP99 = quantile(b.latency, 0.50), quantile(b.latency, 0.99)
		}
		out = append(out, p)
	}
	return out
}

// quantile reads q from a latency histogram: the upper bound of the bucket
// holding the q-th observation (the overflow bucket reports the last bound).
func quantile(counts []uint32, q float64) *time.Duration {
	var total uint64
	for _, c := range counts {
		total += uint64(c)
	}
	if total == 0 {
		return nil
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range counts {
		seen += uint64(c)
		if seen >= rank {
			d := latencyBounds[min(i, len(latencyBounds)-1)]
			return &d
		}
	}
	return nil
}
