package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is serve's --gc-heap-floor: 64 MiB. It costs a node at most
// that much resident memory beyond its live heap and cut a saturated
// in-process bench's CPU per delivery by 10–19% (docs/benchmarks.md).
const DefaultFloor = 64 << 20

// maxPercent bounds the GOGC Tune sets: with a live heap of a few MB the
// floor would ask for far more, and a cycle now and then still returns
// memory and runs finalizers.
const maxPercent = 2000

// Tuner adjusts GOGC after every GC cycle; Stop ends it.
type Tuner struct {
	floor   uint64
	percent int // the configured GOGC, the least Tune sets

	// mu orders adjust and Stop, so a cleanup running when Stop is called
	// cannot set GOGC after Stop restored it.
	mu      sync.Mutex
	stopped bool
	set     int // the GOGC last set
	sample  []metrics.Sample
}

// Tune starts a Tuner keeping the heap goal at or above floor bytes. base
// is the GOGC to keep when the live heap reaches the floor by itself
// (100, the runtime's default). It returns nil, changing nothing, when
// floor is 0 or base is negative (GOGC=off).
func Tune(floor uint64, base int) *Tuner {
	if floor == 0 || base < 0 {
		return nil
	}
	t := &Tuner{floor: floor, percent: base, set: base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.adjust()
	t.arm()
	return t
}

// arm registers the cleanup that runs after the next GC cycle: the cleanup
// of an object nothing references runs once the cycle has found it
// unreachable, and arms the one after it. No timer: an idle node is not
// woken.
func (t *Tuner) arm() {
	sentinel := new([16]byte)
	runtime.AddCleanup(sentinel, func(t *Tuner) {
		if t.adjust() {
			t.arm()
		}
	}, t)
}

// adjust sets GOGC for the next cycle from the live heap of the last; false
// once stopped.
func (t *Tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	live := uint64(0)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := Percent(live, t.floor, t.percent)
	// Only a change of more than a tenth is worth a call: the goal moves
	// with every cycle's live heap, and each call recomputes the pacer.
	if old := t.set; p != old && (p > old*11/10 || p < old*9/10 || p == t.percent) {
		debug.SetGCPercent(p)
		t.set = p
	}
	return true
}

// Percent is the GOGC that makes the heap goal live×(1+GOGC/100) at least
// floor: base when live already gets there, at most maxPercent (and never
// below base). Before the first cycle live is 0: base, so the first goal
// is Go's own and cannot overshoot the floor.
func Percent(live, floor uint64, base int) int {
	if live == 0 {
		return base
	}
	if live*uint64(100+base)/100 >= floor {
		return base
	}
	p := int((floor - live) * 100 / live)
	return max(base, min(p, maxPercent))
}

// Stop ends the tuning and restores the configured GOGC. Safe on nil.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	debug.SetGCPercent(t.percent)
}
